"""S3IterableDataset under torchrun: 2 ranks x 2 workers save mid-epoch and resume with 2 ranks (exactly the
rest, per rank), and elastically 2 -> 1 and 1 -> 2 ranks (every unconsumed object exactly once)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.integration.dataset_items import put_numbered_objects

pytest.importorskip("torchdata.stateful_dataloader", reason="StatefulDataLoader: torchdata >= 0.8")

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).with_name("elastic_ranks.py")
OBJECTS = 29


@pytest.fixture
def prefix(boto_s3, bucket: str) -> str:  # type: ignore[no-untyped-def]
    return put_numbered_objects(boto_s3, bucket, "epoch", OBJECTS)


def torchrun(ranks: int, mode: str, work: Path, prefix: str) -> list[dict[str, list[str]]]:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            str(ranks),
            str(SCRIPT),
            mode,
            str(work),
            prefix,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), GLOO_SOCKET_IFNAME="lo"),
    )
    assert result.returncode == 0, result.stderr[-6000:]
    return [json.loads((work / f"{mode}-rank{rank}.json").read_text()) for rank in range(ranks)]


def all_keys() -> Counter:
    return Counter(f"epoch/{index:03d}" for index in range(OBJECTS))


def test_two_ranks_resume_exactly_where_each_stopped(prefix: str, tmp_path: Path) -> None:
    saved = torchrun(2, "save", tmp_path, prefix)
    assert sum((Counter(r["consumed"] + r["rest"]) for r in saved), Counter()) == all_keys()
    resumed = torchrun(2, "resume-same", tmp_path, prefix)
    for rank in range(2):
        assert resumed[rank]["rest"] == saved[rank]["rest"], rank


@pytest.mark.parametrize(("before", "after"), [(2, 1), (1, 2)])
def test_an_elastic_resume_reads_every_unconsumed_object_once(
    prefix: str, tmp_path: Path, before: int, after: int
) -> None:
    saved = torchrun(before, "save", tmp_path, prefix)
    consumed = Counter(key for report in saved for key in report["consumed"])
    resumed = torchrun(after, "resume-elastic", tmp_path, prefix)
    rest = Counter(key for report in resumed for key in report["rest"])
    assert consumed + rest == all_keys()
    assert all(report["rest"] for report in resumed)  # every new rank got a share
