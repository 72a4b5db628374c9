"""torchdata_s3 (this project): load_files_by_s3 / list_files_by_s3 with default settings."""

from __future__ import annotations

import functools
from typing import IO

from torch.utils.data import DataLoader
from torch.utils.data.datapipes.iter import IterableWrapper

import torchdata_s3
from torchdata_s3.client import native_client

from . import fsspec_ranges
from .common import (
    Context,
    Measurement,
    consume_keys,
    consume_listing,
    consume_objects,
    consume_text,
    consume_whole_objects,
    gil_pace,
)
from .epochs import cache_directory, consume_epochs
from .file_transfers import fsspec_get_file, fsspec_put_file
from .images import Sample, consume_images, decode
from .ours_writes import CONFIGURATION as WRITES_CONFIGURATION
from .ours_writes import checkpoint, dcp, upload_large, upload_small, upload_stream  # noqa: F401
from .random_access import read_selection

NAME = "torchdata_s3"
CONFIGURATION = (
    "S3FileLoader defaults (prefetch 128 within 512 MiB, used as measured latency asks; 8 MiB parts; "
    "64 MiB read window); stream.read(1 MiB) to the end of each object (whole: one stream.read()); "
    "epochs: the prefix, cache_dir set; "
    "ranges, cat, get-file, put-file: torchdata_s3.fsspec.S3FileSystem's cat_ranges, cat(list), get_file, "
    "put_file; " + WRITES_CONFIGURATION
)


def _config(ctx: Context, **options: object) -> torchdata_s3.S3Config:
    config = torchdata_s3.S3Config.resolve(
        endpoint_url=ctx.endpoint_url, region=ctx.region, **{**ctx.options, **options}
    )
    # Every adapter builds its client before the timed section (boto3.client(...), S3FileSystem(...)). Ours
    # builds its native client (event loops, connection pool) on first use, so build it here.
    native_client(config)
    return config


def loader(ctx: Context) -> torchdata_s3.S3FileLoader:
    return torchdata_s3.S3FileLoader(IterableWrapper(ctx.urls()), config=_config(ctx))


def _read_objects(ctx: Context) -> Measurement:
    """Every object read to its end through the stream's read(READ_SIZE), the call the peers are timed with
    and the one user code makes. read_chunk() (no copy) is the variant ``torchdata_s3-read_chunk``."""
    return consume_objects(loader(ctx), ctx)


large = _read_objects
small = _read_objects


def whole(ctx: Context) -> Measurement:
    return consume_whole_objects(loader(ctx), ctx)


gil = gil_pace(large)
# The memory workload: one huge object read the same way.
stream = _read_objects


def text(ctx: Context) -> Measurement:
    config = _config(ctx)

    def make_loader() -> DataLoader:
        pipe = IterableWrapper([f"s3://{ctx.bucket}/{ctx.prefix}"]).load_files_by_s3(config=config)
        return DataLoader(
            pipe.readlines(return_path=False), batch_size=ctx.batch_size, num_workers=ctx.num_workers
        )

    return consume_text(make_loader, ctx)


def listing(ctx: Context) -> Measurement:
    config = _config(ctx)
    head = f"s3://{ctx.bucket}/"
    urls = torchdata_s3.S3FileLister(IterableWrapper([head + ctx.prefix]), config=config)
    return consume_keys((url[len(head) :] for url in urls), ctx)


def listing_scale(ctx: Context) -> Measurement:
    """S3FileLister over the prefix, iterated as users do (each URL as it comes)."""
    config = _config(ctx)
    head = f"s3://{ctx.bucket}/"
    urls = torchdata_s3.S3FileLister(IterableWrapper([head + ctx.prefix]), config=config)
    return consume_listing((url[len(head) :] for url in urls), ctx)


# --- images and random: PIL.Image.open, pyarrow and zipfile seek in the stream they are given ---------------


def image_source(stream: IO[bytes]) -> IO[bytes]:
    """What ours hands to PIL.Image.open: the stream itself (seekable), as a user would."""
    return stream


def open_for_random_access(client: torchdata_s3.S3Client, url: str) -> IO[bytes]:
    """What ours hands to pyarrow and zipfile: the stream itself, as a user would; nothing is fetched before
    the reader's first seek or read."""
    return client.open(url)


def _decode_loaded(pair: tuple[str, IO[bytes]], verify: bool = False) -> Sample:
    _url, stream = pair
    return decode(image_source(stream), verify)


def images(ctx: Context) -> Measurement:
    """The user's pipeline: ``IterableWrapper(urls).load_files_by_s3().map(decode)`` in a DataLoader (the
    loader is the sharding point: each worker loads its share)."""
    config = _config(ctx)

    def make_loader() -> DataLoader:
        pipe = IterableWrapper(ctx.urls()).load_files_by_s3(config=config)
        pipe = pipe.map(functools.partial(_decode_loaded, verify=ctx.verify))
        return DataLoader(pipe, batch_size=None, num_workers=ctx.num_workers)

    return consume_images(make_loader, ctx)


def random(ctx: Context) -> Measurement:
    client = torchdata_s3.S3Client(_config(ctx))
    return read_selection(functools.partial(open_for_random_access, client), ctx)


# --- epochs: the dataset's prefix through the loader, with the local cache and without ---------------------


def read_epochs(ctx: Context, *, cache: bool) -> Measurement:
    """Every epoch lists the prefix and loads what it lists, as a training loop over
    ``load_files_by_s3()`` of a prefix does: the listing gives each object's ETag, which confirms a cache
    entry without a request of its own. With ``cache``, a fresh ``cache_dir`` per measurement."""
    with cache_directory(ctx) as directory:
        config = _config(ctx, cache_dir=directory) if cache else _config(ctx)
        prefix = f"s3://{ctx.bucket}/{ctx.prefix}"
        return consume_epochs(
            lambda: torchdata_s3.S3FileLoader(IterableWrapper([prefix]), config=config), ctx
        )


def epochs(ctx: Context) -> Measurement:
    return read_epochs(ctx, cache=True)


def file_system(ctx: Context):  # type: ignore[no-untyped-def]
    """The fsspec door (``s3crt://``), with its native client built before the clock like every adapter's."""
    from torchdata_s3.fsspec import S3FileSystem

    return S3FileSystem(config=_config(ctx), skip_instance_cache=True)


def ranges(ctx: Context) -> Measurement:
    return fsspec_ranges.cat_ranges(file_system(ctx), ctx)


def cat(ctx: Context) -> Measurement:
    return fsspec_ranges.cat(file_system(ctx), ctx)


def get_file(ctx: Context) -> Measurement:
    return fsspec_get_file(file_system(ctx), ctx)


def put_file(ctx: Context) -> Measurement:
    return fsspec_put_file(file_system(ctx), ctx)
