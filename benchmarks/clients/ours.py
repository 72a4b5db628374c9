"""torchdata_s3 (this project): load_files_by_s3 / list_files_by_s3 with default settings."""

from __future__ import annotations

from torch.utils.data import DataLoader
from torch.utils.data.datapipes.iter import IterableWrapper

import torchdata_s3
from torchdata_s3.client import native_client

from .common import (
    Context,
    Digest,
    Measurement,
    Stopwatch,
    consume_keys,
    consume_objects,
    consume_text,
    gil_pace,
)

NAME = "torchdata_s3"
CONFIGURATION = (
    "S3FileLoader defaults (prefetch 64 within 512 MiB, used as measured latency asks; 8 MiB parts; "
    "64 MiB read window); read_chunk() (no copy)"
)


def _config(ctx: Context) -> torchdata_s3.S3Config:
    config = torchdata_s3.S3Config.resolve(endpoint_url=ctx.endpoint_url, region=ctx.region, **ctx.options)
    # Every adapter builds its client before the timed section (boto3.client(...), S3FileSystem(...)). Ours
    # builds its native client (event loops, connection pool) on first use, so build it here.
    native_client(config)
    return config


def _read_objects(ctx: Context) -> Measurement:
    import zlib

    digest = Digest(ctx.verify)
    objects = total = 0
    config = _config(ctx)
    with Stopwatch() as watch:
        for _url, stream in torchdata_s3.S3FileLoader(IterableWrapper(ctx.urls()), config=config):
            crc = 0
            while (chunk := stream.read_chunk()) is not None:
                total += len(chunk)
                if digest.enabled:
                    crc = zlib.crc32(chunk, crc)
            if digest.enabled:
                digest.add(crc)
            objects += 1
    return Measurement(objects, total, watch.seconds, digest.value())


large = _read_objects
small = _read_objects
gil = gil_pace(large)


def stream(ctx: Context) -> Measurement:
    """The memory workload: file-object reads of READ_SIZE, as most user code does (not read_chunk)."""
    loader = torchdata_s3.S3FileLoader(IterableWrapper(ctx.urls()), config=_config(ctx))
    return consume_objects(loader, ctx)


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
