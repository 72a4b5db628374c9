"""AWS's s3torchconnector (CRT-based): S3IterableDataset.from_objects, S3Reader.read(1 MiB)."""

from __future__ import annotations

from s3torchconnector import S3ClientConfig, S3IterableDataset
from s3torchconnector._s3client import S3Client

from .common import Context, Measurement, consume_keys, consume_objects, gil_pace

NAME = "s3torchconnector"
CONFIGURATION = (
    "S3IterableDataset.from_objects, S3ClientConfig(force_path_style=True) defaults, sequential reader"
)


def _config() -> S3ClientConfig:
    return S3ClientConfig(force_path_style=True)


def _read_objects(ctx: Context) -> Measurement:
    dataset = S3IterableDataset.from_objects(
        ctx.urls(), region=ctx.region, endpoint=ctx.endpoint_url, s3client_config=_config()
    )
    return consume_objects(((reader.key, reader) for reader in dataset), ctx)


large = _read_objects
small = _read_objects


def listing(ctx: Context) -> Measurement:
    # The public API lists only inside from_prefix(); its client's list_objects is what that uses.
    client = S3Client(ctx.region, endpoint=ctx.endpoint_url, s3client_config=_config())

    def keys():  # type: ignore[no-untyped-def]
        for page in client.list_objects(ctx.bucket, ctx.prefix):
            for info in page.object_info:
                yield info.key

    return consume_keys(keys(), ctx)


# One 1 GiB object read the same way (the memory workload), and the large objects beside a Python thread.
stream = large
gil = gil_pace(large)
