"""boto3's managed transfer (s3transfer): download_fileobj with concurrent ranged GETs."""

from __future__ import annotations

import io
import zlib

from boto3.s3.transfer import TransferConfig

from .boto3_get import client
from .boto3_upload import CONFIGURATION as WRITES_CONFIGURATION
from .boto3_upload import checkpoint, upload_large, upload_small, upload_stream  # noqa: F401
from .common import Context, Digest, Measurement, MiB, Stopwatch, gil_pace
from .file_transfers import time_get_file, time_put_file

NAME = "boto3-transfer"
CONFIGURATION = (
    "download_fileobj into BytesIO, TransferConfig(multipart_chunksize=8 MiB, max_concurrency=10); "
    "get-file, put-file: download_file, upload_file with the same TransferConfig; " + WRITES_CONFIGURATION
)


# 8 MiB parts, as every client here uses, ten at a time (boto3's default concurrency).
TRANSFER = TransferConfig(multipart_threshold=8 * MiB, multipart_chunksize=8 * MiB, max_concurrency=10)


def large(ctx: Context) -> Measurement:
    s3 = client(ctx)
    config = TRANSFER
    digest = Digest(ctx.verify)
    objects = total = 0
    with Stopwatch() as watch:
        for key in ctx.keys:
            sink = io.BytesIO()
            s3.download_fileobj(ctx.bucket, key, sink, Config=config)
            data = sink.getbuffer()
            total += len(data)
            if digest.enabled:
                digest.add(zlib.crc32(data))
            del data
            objects += 1
    return Measurement(objects, total, watch.seconds, digest.value(), watch.cpu_seconds)


# The large objects beside a Python thread (no `stream`: download_fileobj is not a stream reader).
gil = gil_pace(large)


def _split(url: str) -> tuple[str, str]:
    bucket, _, key = url[len("s3://") :].partition("/")
    return bucket, key


def get_file(ctx: Context) -> Measurement:
    s3 = client(ctx)
    return time_get_file(ctx, lambda url, path: s3.download_file(*_split(url), path, Config=TRANSFER))


def put_file(ctx: Context) -> Measurement:
    s3 = client(ctx)
    return time_put_file(ctx, lambda path, url: s3.upload_file(path, *_split(url), Config=TRANSFER))
