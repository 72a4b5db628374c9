"""Two torchrun ranks x two DataLoader workers: every object read by exactly one (rank, worker), and the
README's recipe lists once for the whole job."""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.readme import readme_example
from tests.s3_server import MotoServer

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).with_name("distributed_pipeline.py")
# pipeline -> the worker ids each rank reports under (-1: the rank's main process, num_workers=0)
PIPELINES = {
    "lister": (0, 1),
    "loader": (0, 1),
    "loader-in-main": (-1,),
    "recipe-epoch0": (0, 1),
    "recipe-epoch1": (0, 1),
}
RANKS, WORKERS = 2, 2  # WORKERS: num_workers of the DataLoaders that use workers
OBJECTS = 14  # not a multiple of 4: the shares differ in size


def list_requests(server: MotoServer, bucket: str, prefix: str) -> int:
    return sum(
        1
        for request in server.logged_requests()
        if request.startswith(f"GET /{bucket}")
        and "list-type=2" in request
        and re.search(rf"[?&]prefix={prefix}(&| )", request)
    )


@pytest.fixture
def dataset(boto_s3, bucket: str) -> Counter:  # type: ignore[no-untyped-def]
    """The same objects under lister/, loader/ and recipe/; Counter of (key without prefix, sha256)."""
    generator = random.Random(7)
    expected: Counter = Counter()
    for number in range(OBJECTS):
        body = generator.randbytes(generator.randrange(0, 50_000))
        name = f"part-{number:02d}.bin"
        for prefix in ("lister", "loader", "recipe"):
            boto_s3.put_object(Bucket=bucket, Key=f"{prefix}/{name}", Body=body)
        expected[(name, hashlib.sha256(body).hexdigest())] += 1
    return expected


def test_ranks_and_workers_read_disjoint_shares_that_cover_the_dataset(
    dataset: Counter, bucket: str, moto_server: MotoServer, tmp_path: Path
) -> None:
    recipe = tmp_path / "train.py"
    recipe.write_text(readme_example("# train.py"))
    reports = tmp_path / "reports"
    reports.mkdir()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",  # what the `torchrun` command runs, with this interpreter
            "--standalone",
            "--nproc_per_node",
            str(RANKS),
            str(SCRIPT),
            str(reports),
            str(recipe),
            bucket,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), GLOO_SOCKET_IFNAME="lo"),
    )
    assert result.returncode == 0, result.stderr[-6000:]

    for pipeline, workers in PIPELINES.items():
        shares = {}
        for rank in range(RANKS):
            for worker in workers:
                path = reports / f"{pipeline}-rank{rank}-worker{worker}.json"
                assert path.exists(), f"{pipeline}: rank {rank} worker {worker} read nothing"
                shares[rank, worker] = Counter(
                    (url.rsplit("/", 1)[1], digest) for url, digest, _pid in json.loads(path.read_text())
                )
        names = sorted(shares)
        for i, first in enumerate(names):
            for second in names[i + 1 :]:
                overlap = shares[first] & shares[second]
                assert not overlap, f"{pipeline}: {first} and {second} both read {sorted(overlap)}"
        assert sum(shares.values(), Counter()) == dataset, pipeline

    # Listing: the classic pipeline and the prefix-fed loader list in every worker of every rank; the
    # recipe lists once (rank 0, in the main process) for both epochs.
    assert list_requests(moto_server, bucket, "lister/") == RANKS * WORKERS
    assert list_requests(moto_server, bucket, "loader/") == RANKS * WORKERS + RANKS  # + loader-in-main
    assert list_requests(moto_server, bucket, "recipe/") == 1

    # list_files_once: the listing rank's failure is raised on every rank; in a worker it is refused.
    for rank in range(RANKS):
        failures = json.loads((reports / f"failures-rank{rank}.json").read_text())
        assert failures == {
            "missing bucket": f"S3FileNotFoundError: s3://{bucket}-missing/",
            "in a worker": "refused",
        }, rank
