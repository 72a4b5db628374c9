"""boto3's write workloads, through its managed transfer (s3transfer): ``upload_fileobj`` and
``download_fileobj`` with a ``TransferConfig``. Imported by :mod:`boto3_transfer` (the ``boto3-transfer``
row).

The request checksum botocore adds by default (a CRC32, an aws-chunked trailer over HTTPS) is off in the
measurement environment (``AWS_REQUEST_CHECKSUM_CALCULATION=when_required``, see benchmarks.runner): S3 does
not require it and ours sends none. Over plain HTTP botocore still signs each body's SHA-256 (over HTTPS it
sends ``UNSIGNED-PAYLOAD``): that CPU is boto3's.
"""

from __future__ import annotations

import io
from typing import IO

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config

from .checkpoints import time_checkpoint
from .common import Context, Measurement, MiB, bucket_and_key
from .uploads import in_thread_pool, time_stream, time_uploads

# boto3's defaults (threshold and part 8 MiB, 10 threads), also the reads' configuration in boto3_transfer.
TRANSFER = TransferConfig(multipart_threshold=8 * MiB, multipart_chunksize=8 * MiB, max_concurrency=10)
# Many small objects: a thread pool of upload_fileobj on one shared client (boto3 clients are thread-safe),
# as many threads and pooled connections as ours keeps objects in flight (S3FileSaver's 64). Each call uploads
# in its own thread (use_threads=False): a small object is one PutObject, and a transfer thread pool per
# call would only add threads.
SMALL_OBJECT_WORKERS = 64
SMALL_OBJECT_TRANSFER = TransferConfig(multipart_threshold=8 * MiB, use_threads=False)

CONFIGURATION = (
    "writes: upload_fileobj(BytesIO) per object, TransferConfig(multipart_threshold=8 MiB, "
    "multipart_chunksize=8 MiB, max_concurrency=10) (upload-large, upload-stream: handed the open file); "
    f"upload-small: ThreadPoolExecutor({SMALL_OBJECT_WORKERS}) of upload_fileobj(use_threads=False), "
    f"max_pool_connections={SMALL_OBJECT_WORKERS}; checkpoint: torch.save into BytesIO + upload_fileobj, "
    "download_fileobj into BytesIO + torch.load; request checksums when_required (none sent)"
)


def _client(ctx: Context, connections: int = 10):  # type: ignore[no-untyped-def]
    return boto3.client(
        "s3",
        endpoint_url=ctx.endpoint_url,
        region_name=ctx.region,
        config=Config(max_pool_connections=connections),
    )


def upload_large(ctx: Context) -> Measurement:
    s3 = _client(ctx)

    def upload(objects: list[tuple[str, bytes]]) -> None:
        for url, data in objects:
            s3.upload_fileobj(io.BytesIO(data), *bucket_and_key(url), Config=TRANSFER)

    return time_uploads(ctx, upload)


def upload_small(ctx: Context) -> Measurement:
    s3 = _client(ctx, SMALL_OBJECT_WORKERS)

    def put(url: str, data: bytes) -> None:
        s3.upload_fileobj(io.BytesIO(data), *bucket_and_key(url), Config=SMALL_OBJECT_TRANSFER)

    return time_uploads(ctx, in_thread_pool(put, SMALL_OBJECT_WORKERS))


def upload_stream(ctx: Context) -> Measurement:
    """boto3's idiom for a stream: hand upload_fileobj the readable file; it reads it a part at a time."""
    s3 = _client(ctx)

    def upload(url: str, source: IO[bytes]) -> None:
        s3.upload_fileobj(source, *bucket_and_key(url), Config=TRANSFER)

    return time_stream(ctx, upload)


def checkpoint(ctx: Context) -> Measurement:
    import torch

    s3 = _client(ctx)

    def save(state: dict, url: str) -> None:
        buffer = io.BytesIO()
        torch.save(state, buffer)
        buffer.seek(0)
        s3.upload_fileobj(buffer, *bucket_and_key(url), Config=TRANSFER)

    def load(url: str) -> dict:
        buffer = io.BytesIO()
        s3.download_fileobj(*bucket_and_key(url), buffer, Config=TRANSFER)
        buffer.seek(0)
        return torch.load(buffer, map_location="cpu")

    return time_checkpoint(ctx, save, load)
