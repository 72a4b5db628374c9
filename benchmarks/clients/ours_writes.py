"""torchdata_s3's write workloads: ``open(url, "wb")``, ``S3FileSaver`` (``save_by_s3``), ``save``/``load``,
and its ``torch.distributed.checkpoint`` storage. Imported by :mod:`ours`; the configuration is ours'
defaults (``S3Config.resolve`` with the endpoint and region), which send no checksum."""

from __future__ import annotations

from typing import IO

from .checkpoints import time_checkpoint
from .common import Context, Measurement
from .dcp_ranks import dcp_workload
from .uploads import Objects, one_at_a_time, time_stream, time_uploads, write_pieces

CONFIGURATION = (
    "writes: torchdata_s3.open(url, 'wb') + write(data) per object (upload-large), S3FileSaver over "
    "(url, bytes) items, max_in_flight=64 (upload-small), write(1 MiB) per piece (upload-stream), "
    "torchdata_s3.save/load (checkpoint), torchdata_s3.dcp.S3StorageWriter/Reader defaults, thread_count=2 "
    "(dcp); 8 MiB parts, 128 MiB write window; no checksum (its default)"
)


def _config(ctx: Context):  # type: ignore[no-untyped-def]
    from .ours import _config as config

    return config(ctx)


def _writer_opener(ctx: Context):  # type: ignore[no-untyped-def]
    import torchdata_s3

    config = _config(ctx)

    def open_writer(url: str) -> IO[bytes]:
        return torchdata_s3.open(url, "wb", config=config)

    return open_writer


def upload_large(ctx: Context) -> Measurement:
    """Each object through its own writer, ``with torchdata_s3.open(url, "wb") as f: f.write(data)``."""
    return time_uploads(ctx, one_at_a_time(_writer_opener(ctx)))


def upload_small(ctx: Context) -> Measurement:
    """The bulk path: ``S3FileSaver`` (``save_by_s3``) over ``(url, data)`` items, its defaults (64 objects in
    flight). One writer per object in turn is the variant ``torchdata_s3-open``."""
    import torchdata_s3

    config = _config(ctx)

    def save_all(objects: Objects) -> None:
        for _url in torchdata_s3.S3FileSaver(objects, config=config):
            pass

    return time_uploads(ctx, save_all)


def upload_stream(ctx: Context) -> Measurement:
    return time_stream(ctx, write_pieces(_writer_opener(ctx)))


def checkpoint(ctx: Context) -> Measurement:
    import torchdata_s3

    config = _config(ctx)
    return time_checkpoint(
        ctx,
        lambda state, url: torchdata_s3.save(state, url, config=config),
        lambda url: torchdata_s3.load(url, config=config, map_location="cpu"),
    )


def dcp_storage_writer(ctx: Context, url: str):  # type: ignore[no-untyped-def]
    from torchdata_s3.dcp import S3StorageWriter

    return S3StorageWriter(url, config=_config(ctx))


def dcp_storage_reader(ctx: Context, url: str):  # type: ignore[no-untyped-def]
    from torchdata_s3.dcp import S3StorageReader

    return S3StorageReader(url, config=_config(ctx))


dcp = dcp_workload(__name__)
