"""Micro-benchmarks of single operations (pytest-benchmark), for catching regressions between commits.

Run and compare against the saved baseline (same kind of machine; timings vary, so only large slowdowns
fail):

    python -m pytest benchmarks/micro --benchmark-only \\
        --benchmark-storage=file://benchmarks/micro/baseline --benchmark-compare=0001 \\
        --benchmark-compare-fail=median:100%

Save a new baseline with ``--benchmark-save=baseline`` instead of the two compare options.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.endpoint.nginx import LocalEndpoint, ensure_nginx_installed
from torchdata_s3 import S3Client, S3Config

BUCKET = "micro"
SMALL_BYTES = 110_000
LARGE_BYTES = 32 * 1024 * 1024
PAGE_KEYS = 1000


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Client]:
    ensure_nginx_installed()
    root: Path = tmp_path_factory.mktemp("micro")
    bucket = root / BUCKET
    (bucket / "page").mkdir(parents=True)
    for index in range(PAGE_KEYS):
        (bucket / "page" / f"k{index:05d}").write_bytes(b"x")
    rng = random.Random(0)
    (bucket / "small.bin").write_bytes(rng.randbytes(SMALL_BYTES))
    (bucket / "large.bin").write_bytes(rng.randbytes(LARGE_BYTES))
    with LocalEndpoint(root, "fast") as endpoint:
        yield S3Client(S3Config(endpoint_url=endpoint.endpoint_url, access_key_id="x", secret_access_key="y"))


def test_list_one_page_of_1000_keys(benchmark, client: S3Client) -> None:  # type: ignore[no-untyped-def]
    keys = benchmark(lambda: list(client.list_objects(f"s3://{BUCKET}/page/")))
    assert len(keys) == PAGE_KEYS


def test_get_small_object(benchmark, client: S3Client) -> None:  # type: ignore[no-untyped-def]
    data = benchmark(lambda: client.open(f"s3://{BUCKET}/small.bin").read())
    assert len(data) == SMALL_BYTES


def test_get_large_object(benchmark, client: S3Client) -> None:  # type: ignore[no-untyped-def]
    def read_all() -> int:
        stream = client.open(f"s3://{BUCKET}/large.bin")
        total = 0
        while (chunk := stream.read_chunk()) is not None:
            total += len(chunk)
        return total

    assert benchmark.pedantic(read_all, rounds=10, iterations=1, warmup_rounds=1) == LARGE_BYTES
