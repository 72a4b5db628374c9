"""s3torchconnector's write workloads: ``S3Checkpoint.writer(url)`` (an ``S3Writer``, its public way to write
any object) and ``.reader(url)``, and its ``torch.distributed.checkpoint`` storage in
``s3torchconnector.dcp``. Imported by :mod:`s3torchconnector_client`. It sends no request checksum by
default; every upload is a multipart upload (CreateMultipartUpload, parts, Complete), also for a small
object."""

from __future__ import annotations

from typing import IO

from .checkpoints import time_checkpoint
from .common import Context, Measurement
from .dcp_ranks import THREAD_COUNT, dcp_workload
from .uploads import in_thread_pool, one_at_a_time, time_stream, time_uploads, write_pieces

# Many small objects: a thread pool of writers on the one client (the CRT client is thread-safe), as many as
# ours keeps objects in flight. Its docs show no bulk upload API.
SMALL_OBJECT_WORKERS = 64

CONFIGURATION = (
    "writes: S3Checkpoint(region, endpoint, S3ClientConfig(force_path_style=True)) defaults (8 MiB parts, "
    "10 Gbps target); writer(url).write(data) per object (upload-large), ThreadPoolExecutor("
    f"{SMALL_OBJECT_WORKERS}) of writers (upload-small), write(1 MiB) per piece (upload-stream); "
    "checkpoint: torch.save(writer) / torch.load(reader), its README's form; dcp: "
    f"s3torchconnector.dcp.S3StorageWriter(thread_count={THREAD_COUNT}) / S3StorageReader (its default "
    "dcp_optimized reader), each on an S3FileSystem given an S3Client with the endpoint"
)


def _client_config():  # type: ignore[no-untyped-def]
    from s3torchconnector import S3ClientConfig

    return S3ClientConfig(force_path_style=True)


def _checkpoint(ctx: Context):  # type: ignore[no-untyped-def]
    from s3torchconnector import S3Checkpoint

    checkpoint = S3Checkpoint(ctx.region, endpoint=ctx.endpoint_url, s3client_config=_client_config())
    # Like every adapter's, its client is built before the clock; it builds its native part on first use.
    checkpoint._client._client  # noqa: B018
    return checkpoint


def upload_large(ctx: Context) -> Measurement:
    return time_uploads(ctx, one_at_a_time(_checkpoint(ctx).writer))


def upload_small(ctx: Context) -> Measurement:
    checkpoint = _checkpoint(ctx)

    def put(url: str, data: bytes) -> None:
        with checkpoint.writer(url) as writer:
            writer.write(data)

    return time_uploads(ctx, in_thread_pool(put, SMALL_OBJECT_WORKERS))


def upload_stream(ctx: Context) -> Measurement:
    checkpoint = _checkpoint(ctx)

    def open_writer(url: str) -> IO[bytes]:
        return checkpoint.writer(url)

    return time_stream(ctx, write_pieces(open_writer))


def checkpoint(ctx: Context) -> Measurement:
    import torch

    manager = _checkpoint(ctx)

    def save(state: dict, url: str) -> None:
        with manager.writer(url) as writer:
            torch.save(state, writer)

    def load(url: str) -> dict:
        with manager.reader(url) as reader:
            return torch.load(reader, map_location="cpu")

    return time_checkpoint(ctx, save, load)


def _filesystem(ctx: Context, reader_constructor=None):  # type: ignore[no-untyped-def]
    """Its dcp storage takes a region but no endpoint: the same S3FileSystem its constructor makes, given a
    client that has the endpoint."""
    from s3torchconnector._s3client import S3Client
    from s3torchconnector.dcp import S3FileSystem

    client = S3Client(ctx.region, endpoint=ctx.endpoint_url, s3client_config=_client_config())
    return S3FileSystem(ctx.region, s3_client=client, reader_constructor=reader_constructor)


def dcp_storage_writer(ctx: Context, url: str):  # type: ignore[no-untyped-def]
    from s3torchconnector.dcp import S3StorageWriter

    writer = S3StorageWriter(ctx.region, url, s3client_config=_client_config(), thread_count=THREAD_COUNT)
    writer.fs = _filesystem(ctx)
    return writer


def dcp_storage_reader(ctx: Context, url: str):  # type: ignore[no-untyped-def]
    from s3torchconnector import S3ReaderConstructor
    from s3torchconnector.dcp import S3StorageReader

    constructor = S3ReaderConstructor.dcp_optimized()  # its default, named so the filesystem gets the same
    reader = S3StorageReader(
        ctx.region, url, s3client_config=_client_config(), reader_constructor=constructor
    )
    reader.fs = _filesystem(ctx, constructor)
    return reader


dcp = dcp_workload(__name__)
