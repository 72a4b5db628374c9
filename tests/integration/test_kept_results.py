"""Large read() results reused by the next read() of a similar size once nobody holds them (kept_results.h).

What must hold: a result handed out never changes while anything refers to it (the bytes themselves, a
memoryview, a numpy array over it, a dict keyed by it); a reused one holds exactly the new object, at its
length, with a hash of its own; results too small to be kept, or filled less than half, are never reused;
and reuse does happen when the previous result was let go of (else the test of it could not fail). The
sanitizer run includes this file.
"""

from __future__ import annotations

import gc
import random
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import numpy as np
import pytest

from torchdata_s3 import S3Client, S3Config, _core

pytestmark = pytest.mark.integration

MiB = 1024 * 1024
# Kept results are at least 8 MiB (kMinKeptResultBytes) and reused for reads that fill half of them or more.
SIZES = {"a": 20 * MiB, "b": 20 * MiB, "c": 20 * MiB, "shorter": 11 * MiB + 12345, "under-half": 9 * MiB}


@pytest.fixture
def objects(boto_s3, bucket: str) -> Iterator[dict[str, bytes]]:  # type: ignore[no-untyped-def]
    stored = {}
    for seed, (name, size) in enumerate(SIZES.items()):
        stored[name] = random.Random(seed).randbytes(size)
        boto_s3.put_object(Bucket=bucket, Key=name, Body=stored[name])
    yield stored
    gc.collect()


def read_whole(client: S3Client, bucket: str, name: str) -> bytes:
    with client.open(f"s3://{bucket}/{name}") as stream:
        return stream.read()  # type: ignore[no-any-return]


def client() -> S3Client:
    return S3Client(S3Config.resolve(part_size_bytes=2 * MiB))


def test_a_result_let_go_of_holds_the_next_objects_bytes(objects: dict[str, bytes], bucket: str) -> None:
    reader = client()
    first = read_whole(reader, bucket, "a")
    assert first == objects["a"]
    hash(first)  # cached in the object: a reused one must not keep it
    del first
    before = _core.results_reused()
    second = read_whole(reader, bucket, "b")
    assert _core.results_reused() == before + 1
    assert second == objects["b"] and len(second) == SIZES["b"]
    assert hash(second) == hash(bytes(objects["b"]))


def test_results_still_referred_to_never_change(objects: dict[str, bytes], bucket: str) -> None:
    reader = client()
    kept = read_whole(reader, bucket, "a")
    view = memoryview(read_whole(reader, bucket, "b"))
    array = np.frombuffer(read_whole(reader, bucket, "c"), dtype=np.uint8)
    keyed = {read_whole(reader, bucket, "a"): "key"}
    for _ in range(3):  # more reads of the same size: none may take any of those
        for name in ("a", "b", "c"):
            assert read_whole(reader, bucket, name) == objects[name]
    assert kept == objects["a"]
    assert view.tobytes() == objects["b"]
    assert array.tobytes() == objects["c"]
    [key] = keyed
    assert key == objects["a"] and keyed[bytes(objects["a"])] == "key"


def test_a_reused_result_is_shortened_to_a_smaller_object(objects: dict[str, bytes], bucket: str) -> None:
    reader = client()
    read_whole(reader, bucket, "a")  # let go of at once
    before = _core.results_reused()
    shorter = read_whole(reader, bucket, "shorter")
    assert _core.results_reused() == before + 1  # 20 MiB of memory for 11 MiB: filled more than half
    assert shorter == objects["shorter"] and len(shorter) == SIZES["shorter"]
    assert hash(shorter) == hash(bytes(objects["shorter"]))
    del shorter
    # The kept memory is still 20 MiB: a 20 MiB object fits it again.
    assert read_whole(reader, bucket, "b") == objects["b"]


def test_results_under_half_full_or_too_small_are_not_reused(objects: dict[str, bytes], bucket: str) -> None:
    # In a process of its own: this one's pool holds what the other tests left in it.
    script = textwrap.dedent(
        f"""
        from torchdata_s3 import S3Client, S3Config, _core
        client = S3Client(S3Config.resolve(part_size_bytes={2 * MiB}))
        def whole(name):
            with client.open(f"s3://{bucket}/{{name}}") as stream:
                return stream.read()
        assert len(whole("a")) == {SIZES["a"]}  # kept, and let go of at once
        assert len(whole("under-half")) == {SIZES["under-half"]}  # 9 MiB in 20: under half
        with client.open(f"s3://{bucket}/b") as stream:
            for _ in range(3):
                assert len(stream.read(100 * 1024)) == 100 * 1024  # too small to be kept
        print(_core.results_reused())
        """
    )
    ran = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["0"]
