"""torchdata_s3.dcp without a server: reachable as an attribute of the package (imported on first use), and
what it takes as a checkpoint URL."""

from __future__ import annotations

import pytest

import torchdata_s3
from torchdata_s3.checkpoint.dcp_filesystem import S3FileSystem, checkpoint_url


def test_the_dcp_module_is_an_attribute_of_the_package() -> None:
    assert torchdata_s3.dcp.S3StorageWriter.__module__ == "torchdata_s3.checkpoint.dcp"
    assert torchdata_s3.dcp.S3StorageReader.__module__ == "torchdata_s3.checkpoint.dcp"
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        torchdata_s3.nothing  # noqa: B018


@pytest.mark.parametrize(
    ("url", "prefix"),
    [
        ("s3://bucket/checkpoints/step-100", "s3://bucket/checkpoints/step-100"),
        ("s3://bucket/checkpoints/step-100/", "s3://bucket/checkpoints/step-100"),
        ("S3://bucket/a b/ü", "s3://bucket/a b/ü"),
        ("s3://bucket", "s3://bucket"),
        ("s3://bucket/", "s3://bucket"),
    ],
)
def test_a_checkpoint_is_a_prefix_without_its_trailing_slash(url: str, prefix: str) -> None:
    assert checkpoint_url(url) == prefix
    assert S3FileSystem.validate_checkpoint_id(url)


@pytest.mark.parametrize("url", ["/local/dir", "gs://bucket/x", "s3://", "", None])
def test_other_checkpoint_ids_are_not_ours(url: object) -> None:
    assert not S3FileSystem.validate_checkpoint_id(url)  # type: ignore[arg-type]
    with pytest.raises(torchdata_s3.InvalidS3UrlError):
        checkpoint_url(url)
