"""The README's upload and checkpoint examples run as written, against a real S3-protocol server (the
distributed examples run under torchrun in test_distributed.py and test_dcp.py)."""

from __future__ import annotations

import io
import json

import pytest
import torch

from tests.readme import readme_example

pytestmark = pytest.mark.integration


def test_the_readme_upload_example_runs(boto_s3) -> None:  # type: ignore[no-untyped-def]
    boto_s3.create_bucket(Bucket="my-bucket")
    exec(compile(readme_example("# upload.py"), "upload.py", "exec"), {"__name__": "__main__"})
    body = boto_s3.get_object(Bucket="my-bucket", Key="logs/run-1.jsonl")["Body"].read()
    assert [json.loads(line)["step"] for line in body.splitlines()] == [0, 1, 2]


def test_the_readme_checkpoint_example_runs(boto_s3) -> None:  # type: ignore[no-untyped-def]
    boto_s3.create_bucket(Bucket="my-bucket")
    namespace: dict = {"__name__": "__main__"}
    exec(compile(readme_example("# checkpoint.py"), "checkpoint.py", "exec"), namespace)
    saved = torch.load(
        io.BytesIO(boto_s3.get_object(Bucket="my-bucket", Key="checkpoints/model.pt")["Body"].read())
    )
    for name, tensor in namespace["model"].state_dict().items():
        assert torch.equal(saved[name], tensor), name
