"""torchdata_s3 without PyTorch: the client, open() and the fsspec filesystem work; the doors that build on
torch say what to install. Here torch is hidden from a fresh interpreter (sys.modules["torch"] = None makes
both `import torch` and find_spec fail as if it were absent); the wheels' smoke test (tests/smoke) runs the
same doors in environments where torch really is not installed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.integration


def run_without_torch(code: str, endpoint_url: str) -> str:
    prelude = "import sys\nsys.modules['torch'] = None\n"
    result = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "AWS_ENDPOINT_URL": endpoint_url},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_client_open_and_fsspec_work_without_torch(s3_endpoint: str) -> None:
    out = run_without_torch(
        """
        import boto3
        boto3.client("s3").create_bucket(Bucket="no-torch")
        import torchdata_s3, fsspec
        with torchdata_s3.open("s3://no-torch/a.bin", "wb") as f:
            f.write(b"x" * 100_000)
        assert torchdata_s3.open("s3://no-torch/a.bin").read() == b"x" * 100_000
        assert [s.key for s in torchdata_s3.S3Client().list_objects("s3://no-torch/")] == ["a.bin"]
        assert fsspec.filesystem("s3crt").cat_file("no-torch/a.bin") == b"x" * 100_000
        assert "torch" not in [name.split(".")[0] for name in sys.modules if sys.modules[name] is not None]
        print("ok")
        """,
        s3_endpoint,
    )
    assert out.strip() == "ok"


@pytest.mark.parametrize(
    "name", ["S3FileLister", "S3FileLoader", "S3IterableDataset", "S3MapDataset", "save"]
)
def test_the_doors_that_need_torch_say_so(name: str, s3_endpoint: str) -> None:
    out = run_without_torch(
        f"""
        import torchdata_s3
        try:
            torchdata_s3.{name}
        except ImportError as error:
            print(error)
        """,
        s3_endpoint,
    )
    assert f"torchdata_s3.{name} needs PyTorch, which is not installed" in out
    assert "pip install torch" in out
