"""import torchdata_s3 needs torch alone; torchdata_s3.nodes needs torchdata >= 0.10 and says so otherwise.
Each check runs in a fresh interpreter with the torchdata of this run, or with none (tests/without_torchdata
first on the path)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HIDE_TORCHDATA = str(Path(__file__).resolve().parents[1] / "without_torchdata")

PROBE = r"""
import torchdata_s3
from torchdata_s3 import S3IterableDataset, S3MapDataset, S3FileLoader
try:
    import torchdata
    version = torchdata.__version__
except ImportError:
    version = "none"
try:
    import torchdata_s3.nodes
    nodes = "imports"
except ImportError as error:
    nodes = str(error)
print(version)
print(nodes)
"""


def probe(hide_torchdata: bool) -> tuple[str, str]:
    environment = dict(os.environ)
    if hide_torchdata:
        environment["PYTHONPATH"] = os.pathsep.join(
            filter(None, [HIDE_TORCHDATA, environment.get("PYTHONPATH")])
        )
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
        check=True,
    )
    version, nodes = done.stdout.strip().splitlines()
    return version, nodes


def test_without_torchdata_the_package_imports_and_nodes_says_what_it_needs() -> None:
    version, nodes = probe(hide_torchdata=True)
    assert version == "none"
    assert "torchdata_s3.nodes needs torchdata >= 0.10" in nodes
    assert "use torchdata_s3.S3IterableDataset or the DataPipes instead" in nodes


def test_with_this_runs_torchdata_nodes_import_exactly_when_it_has_torchdata_nodes() -> None:
    version, nodes = probe(hide_torchdata=False)
    if version == "none":  # this run hides torchdata
        assert "torchdata_s3.nodes needs torchdata >= 0.10" in nodes
    elif tuple(int(part) for part in version.split("+")[0].split(".")[:2]) >= (0, 10):
        assert nodes == "imports"
    else:
        assert "torchdata_s3.nodes needs torchdata >= 0.10" in nodes
