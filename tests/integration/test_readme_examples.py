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


@pytest.fixture
def train_prefix(boto_s3) -> list[str]:  # type: ignore[no-untyped-def]
    """The quick start's s3://my-bucket/train/: a few small text objects."""
    boto_s3.create_bucket(Bucket="my-bucket")
    keys = [f"train/part-{index}.txt" for index in range(5)]
    for index, key in enumerate(keys):
        boto_s3.put_object(Bucket="my-bucket", Key=key, Body=f"line {index}\nmore {index}\n".encode())
    return keys


def test_the_readme_datasets_quick_start_runs(train_prefix: list[str]) -> None:
    namespace: dict = {"__name__": "__main__"}
    source = readme_example("# quickstart_datasets.py")
    exec(compile(source, "quickstart_datasets.py", "exec"), namespace)
    assert namespace["key"] in train_prefix and namespace["data"].startswith(b"line ")
    assert sorted(key for key, _ in namespace["batch"]) <= train_prefix


def test_the_readme_datapipes_quick_start_runs(train_prefix: list[str]) -> None:
    namespace: dict = {"__name__": "__main__"}
    exec(compile(readme_example("# quickstart_datapipes.py"), "quickstart_datapipes.py", "exec"), namespace)
    lines = {f"{word} {index}".encode() for index in range(5) for word in ("line", "more")}
    assert namespace["batch"] and set(namespace["batch"]) <= lines  # the last batch: one worker's lines


def test_the_readme_fsspec_quick_start_runs(boto_s3) -> None:  # type: ignore[no-untyped-def]
    boto_s3.create_bucket(Bucket="my-bucket")
    namespace: dict = {"__name__": "__main__"}
    exec(compile(readme_example("# quickstart_fsspec.py"), "quickstart_fsspec.py", "exec"), namespace)
    body = boto_s3.get_object(Bucket="my-bucket", Key="metrics.parquet")["Body"].read()
    assert namespace["head"] == body[:4] == b"PAR1" and namespace["tail"] == body[-4:] == b"PAR1"
