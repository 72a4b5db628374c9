"""The classic pipeline inside a DataLoader: workers split the objects, nothing read twice or lost, and
nothing (threads, descriptors, worker processes) left behind under fork, spawn and forkserver."""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).with_name("classic_pipeline.py")
LIFECYCLE_SCRIPT = Path(__file__).with_name("worker_lifecycle.py")
SHARDS = 6
LINES_PER_SHARD = 200


@pytest.fixture
def text_dataset(boto_s3, bucket: str) -> list[str]:  # type: ignore[no-untyped-def]
    expected = []
    for shard in range(SHARDS):
        lines = [f"shard{shard:02d} line{i:04d} " + "x" * (i % 50) for i in range(LINES_PER_SHARD)]
        boto_s3.put_object(
            Bucket=bucket, Key=f"dataset/shard-{shard:02d}.txt", Body=("\n".join(lines) + "\n").encode()
        )
        expected += lines
    return expected


def run_pipeline(url: str, *args: str, script: Path = SCRIPT) -> dict:
    result = subprocess.run(
        [sys.executable, str(script), url, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("torchdata_mode", ["with-torchdata", "without-torchdata"])
@pytest.mark.parametrize("num_workers", [0, 2])
def test_classic_pipeline_reads_every_line_once(
    text_dataset: list[str], bucket: str, num_workers: int, torchdata_mode: str
) -> None:
    result = run_pipeline(f"s3://{bucket}/dataset/", str(num_workers), torchdata_mode)
    assert Counter(result["lines"]) == Counter(text_dataset)
    if num_workers == 0:
        assert result["lines"] == text_dataset  # one process: key order, line order
    expected_reader = "torchdata" if torchdata_mode == "with-torchdata" else "torchdata_s3"
    assert result["readlines"].split(".")[0] == expected_reader


@pytest.mark.parametrize("start_method", ["spawn", "forkserver"])
def test_workers_under_spawn_and_forkserver(text_dataset: list[str], bucket: str, start_method: str) -> None:
    result = run_pipeline(f"s3://{bucket}/dataset/", "2", "without-torchdata", start_method)
    assert Counter(result["lines"]) == Counter(text_dataset)


def test_classic_lister_sharding_filter_loader(text_dataset: list[str], bucket: str) -> None:
    result = run_pipeline(f"s3://{bucket}/dataset/", "2", "with-torchdata", "fork", "shard-upstream")
    assert Counter(result["lines"]) == Counter(text_dataset)


def test_second_sharding_point_is_refused(text_dataset: list[str], bucket: str) -> None:
    from torch.utils.data import DataLoader
    from torch.utils.data.datapipes.iter import IterableWrapper

    import torchdata_s3  # noqa: F401

    pipe = IterableWrapper([f"s3://{bucket}/dataset/"]).load_files_by_s3().sharding_filter()
    with pytest.raises(RuntimeError, match="Sharding twice"):
        list(DataLoader(pipe, batch_size=None, num_workers=2))


# Sizes from empty to a few hundred kB: small enough to keep many DataLoader runs quick.
OBJECT_SIZES = [0, 1, 3, 17, 100, 1000, 4096, 65536, 100_000, 150_000, 200_000, 300_000]


@pytest.fixture
def binary_dataset(boto_s3, bucket: str) -> Counter:  # type: ignore[no-untyped-def]
    """Uploads random objects; the Counter of ``(url, sha256)`` every epoch must reproduce exactly."""
    generator = random.Random(5)
    expected: Counter = Counter()
    for number, size in enumerate(OBJECT_SIZES):
        body = generator.randbytes(size)
        key = f"objects/object-{number:02d}.bin"
        boto_s3.put_object(Bucket=bucket, Key=key, Body=body)
        expected[(f"s3://{bucket}/{key}", hashlib.sha256(body).hexdigest())] += 1
    return expected


@pytest.mark.parametrize("start_method", ["fork", "spawn", "forkserver"])
def test_workers_read_everything_once_and_leave_nothing_behind(
    binary_dataset: Counter, bucket: str, start_method: str
) -> None:
    report = run_pipeline(f"s3://{bucket}/objects/", start_method, script=LIFECYCLE_SCRIPT)
    threads, descriptors = report["baseline"]
    runs = report["runs"]
    assert Counter(tuple(item[:2]) for item in report["warm_up"]["epochs"][0]) == binary_dataset
    # what the script's matrix must cover for this start method
    assert {run["workers"] for run in [report["warm_up"], *runs]} == {1, 2, 4}
    assert {run["form"] for run in runs} == {"lister", "loader", "listed-once"}
    assert any(run["persistent"] and len(run["epochs"]) == 2 for run in runs)
    assert any(not run["persistent"] and run["abandon_after"] for run in runs)
    for run in runs:
        where = f"{start_method} {run['form']} x{run['workers']}{' persistent' if run['persistent'] else ''}"
        # one start per worker, also over several epochs of persistent workers
        assert len(run["worker_pids"]) == run["workers"], where
        for epoch in run["epochs"]:
            assert Counter(tuple(item[:2]) for item in epoch) == binary_dataset, where
            # every worker took part, and items came from the workers this DataLoader started
            assert {item[3] for item in epoch} == set(range(run["workers"])), where
            assert {item[2] for item in epoch} <= set(run["worker_pids"]), where
        assert len(run["abandoned"]) == (run["abandon_after"] or 0), where
        assert all(tuple(item[:2]) in binary_dataset for item in run["abandoned"]), where
        assert run["running_after"] == [], f"{where}: workers still running"
        assert (run["threads_after"], run["descriptors_after"]) == (threads, descriptors), (
            f"{where}: threads/descriptors {run['threads_after']}/{run['descriptors_after']}, "
            f"baseline {threads}/{descriptors}"
        )
