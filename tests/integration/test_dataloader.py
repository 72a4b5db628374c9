"""The classic pipeline inside a DataLoader: workers split the objects, nothing read twice or lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).with_name("classic_pipeline.py")
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


def run_pipeline(url: str, *args: str) -> dict:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), url, *args],
        capture_output=True,
        text=True,
        timeout=240,
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
