"""boto3's managed transfer (s3transfer): download_fileobj with concurrent ranged GETs."""

from __future__ import annotations

import io
import zlib

from boto3.s3.transfer import TransferConfig

from .boto3_get import client
from .boto3_upload import CONFIGURATION as WRITES_CONFIGURATION
from .boto3_upload import checkpoint, upload_large, upload_small, upload_stream  # noqa: F401
from .common import Context, Digest, Measurement, MiB, Stopwatch, gil_pace

NAME = "boto3-transfer"
CONFIGURATION = (
    "download_fileobj into BytesIO, TransferConfig(multipart_chunksize=8 MiB, max_concurrency=10); "
    + WRITES_CONFIGURATION
)


def large(ctx: Context) -> Measurement:
    s3 = client(ctx)
    config = TransferConfig(multipart_threshold=8 * MiB, multipart_chunksize=8 * MiB, max_concurrency=10)
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
