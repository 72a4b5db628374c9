"""AWS's s3torchconnector (CRT-based): S3IterableDataset.from_objects, S3Reader.read(1 MiB)."""

from __future__ import annotations

import functools

from s3torchconnector import S3ClientConfig, S3IterableDataset, S3MapDataset, S3ReaderConstructor
from s3torchconnector._s3client import S3Client
from torch.utils.data import DataLoader

from .common import (
    Context,
    Measurement,
    bucket_and_key,
    consume_keys,
    consume_listing,
    consume_objects,
    consume_whole_objects,
    gil_pace,
)
from .images import consume_images, decode
from .random_access import read_selection
from .s3torchconnector_writes import CONFIGURATION as WRITES_CONFIGURATION
from .s3torchconnector_writes import checkpoint, dcp, upload_large, upload_small, upload_stream  # noqa: F401

NAME = "s3torchconnector"
CONFIGURATION = (
    "S3IterableDataset.from_objects, S3ClientConfig(force_path_style=True) defaults, sequential reader; "
    "images: S3MapDataset.from_objects(transform=decode); random: S3ReaderConstructor.range_based(); "
    + WRITES_CONFIGURATION
)


def _config() -> S3ClientConfig:
    return S3ClientConfig(force_path_style=True)


def _readers(ctx: Context):  # type: ignore[no-untyped-def]
    dataset = S3IterableDataset.from_objects(
        ctx.urls(), region=ctx.region, endpoint=ctx.endpoint_url, s3client_config=_config()
    )
    return ((reader.key, reader) for reader in dataset)


def _read_objects(ctx: Context) -> Measurement:
    return consume_objects(_readers(ctx), ctx)


large = _read_objects
small = _read_objects


def whole(ctx: Context) -> Measurement:
    return consume_whole_objects(_readers(ctx), ctx)


def listing(ctx: Context) -> Measurement:
    # The public API lists only inside from_prefix(); its client's list_objects is what that uses.
    client = S3Client(ctx.region, endpoint=ctx.endpoint_url, s3client_config=_config())

    def keys():  # type: ignore[no-untyped-def]
        for page in client.list_objects(ctx.bucket, ctx.prefix):
            for info in page.object_info:
                yield info.key

    return consume_keys(keys(), ctx)


def listing_scale(ctx: Context) -> Measurement:
    """``S3IterableDataset.from_prefix`` iterated for each object's key: its readers fetch nothing until
    read, so this times the listing its users wait for before the first object."""
    dataset = S3IterableDataset.from_prefix(
        f"s3://{ctx.bucket}/{ctx.prefix}",
        region=ctx.region,
        endpoint=ctx.endpoint_url,
        s3client_config=_config(),
    )
    return consume_listing((reader.key for reader in dataset), ctx)


# One 1 GiB object read the same way (the memory workload), and the large objects beside a Python thread.
stream = large
gil = gil_pace(large)


def images(ctx: Context) -> Measurement:
    """The map-style dataset with the decode as its transform (handed each object's S3Reader)."""
    dataset = S3MapDataset.from_objects(
        ctx.urls(),
        region=ctx.region,
        endpoint=ctx.endpoint_url,
        transform=functools.partial(decode, verify=ctx.verify),
        s3client_config=_config(),
    )
    return consume_images(lambda: DataLoader(dataset, batch_size=None, num_workers=ctx.num_workers), ctx)


def random(ctx: Context) -> Measurement:
    """The range-based reader: a ranged GET per read() (8 MiB buffer by default), made for seeking reads."""
    client = S3Client(ctx.region, endpoint=ctx.endpoint_url, s3client_config=_config())
    # Like every adapter's, its client is built before the clock; this one builds its native part lazily.
    client._client  # noqa: B018

    def open_file(url: str):  # type: ignore[no-untyped-def]
        return client.get_object(*bucket_and_key(url), reader_constructor=S3ReaderConstructor.range_based())

    return read_selection(open_file, ctx)
