"""s3fs used directly: open()+read for large objects, cat_file for small ones, find() for listing."""

from __future__ import annotations

import s3fs

from . import fsspec_ranges
from .common import (
    Context,
    Measurement,
    consume_bytes_objects,
    consume_keys,
    consume_listing,
    consume_objects,
    gil_pace,
    strip_bucket,
)
from .file_transfers import fsspec_get_file, fsspec_put_file
from .random_access import read_selection
from .s3fs_writes import CONFIGURATION as WRITES_CONFIGURATION
from .s3fs_writes import upload_large, upload_small, upload_stream  # noqa: F401

NAME = "s3fs"
CONFIGURATION = (
    "S3FileSystem (fresh instance), open(block_size=8 MiB)+read(1 MiB); cat_file for small; find(); "
    "ranges, cat, get-file, put-file: its cat_ranges, cat(list), get_file, put_file (defaults); "
    "random: open(url, 'rb') with its defaults; " + WRITES_CONFIGURATION
)


def filesystem(ctx: Context) -> s3fs.S3FileSystem:
    return s3fs.S3FileSystem(
        skip_instance_cache=True,
        client_kwargs={"endpoint_url": ctx.endpoint_url, "region_name": ctx.region},
    )


def large(ctx: Context) -> Measurement:
    fs = filesystem(ctx)

    def streams():  # type: ignore[no-untyped-def]
        for key in ctx.keys:
            with fs.open(f"{ctx.bucket}/{key}", "rb", block_size=8 * 1024 * 1024) as handle:
                yield key, handle

    return consume_objects(streams(), ctx)


def small(ctx: Context) -> Measurement:
    fs = filesystem(ctx)
    return consume_bytes_objects((fs.cat_file(f"{ctx.bucket}/{key}") for key in ctx.keys), ctx)


def listing(ctx: Context) -> Measurement:
    fs = filesystem(ctx)
    # find() returns the whole list at once, so the generator below times the requests it makes.
    return consume_keys(
        (strip_bucket(k, ctx.bucket) for k in _lazy(lambda: fs.find(f"{ctx.bucket}/{ctx.prefix}"))), ctx
    )


def listing_scale(ctx: Context) -> Measurement:
    """``find()`` of the prefix: one sorted list once every page has come (so the first key is the last)."""
    fs = filesystem(ctx)
    return consume_listing(
        (strip_bucket(k, ctx.bucket) for k in _lazy(lambda: fs.find(f"{ctx.bucket}/{ctx.prefix}"))), ctx
    )


def _lazy(call):  # type: ignore[no-untyped-def]
    yield from call()


# One 1 GiB object read the same way (the memory workload), and the large objects beside a Python thread.
stream = large
gil = gil_pace(large)


def random(ctx: Context) -> Measurement:
    """``fs.open(url, "rb")`` with s3fs's default block size and read-ahead cache, as users call it."""
    fs = filesystem(ctx)
    return read_selection(lambda url: fs.open(url, "rb"), ctx)


def ranges(ctx: Context) -> Measurement:
    """Its own cat_ranges (fsspec's async batch of ranged GETs)."""
    return fsspec_ranges.cat_ranges(filesystem(ctx), ctx)


def cat(ctx: Context) -> Measurement:
    """Its own cat(list) (fsspec's async batch of GETs)."""
    return fsspec_ranges.cat(filesystem(ctx), ctx)


def get_file(ctx: Context) -> Measurement:
    return fsspec_get_file(filesystem(ctx), ctx)


def put_file(ctx: Context) -> Measurement:
    return fsspec_put_file(filesystem(ctx), ctx)
