"""fsspec's write workloads over s3fs: torchdata 0.9's ``save_by_fsspec`` (the original DataPipes' write
path) for uploads, ``torch.save``/``torch.load`` through ``fsspec.open(url)`` for checkpoints, and torch's own
fsspec storage for ``torch.distributed.checkpoint`` (``FsspecWriter``/``FsspecReader``, in torch 2.13 only in
``torch.distributed.checkpoint._fsspec_filesystem``). Imported by :mod:`fsspec_opener`. Request checksums:
when_required (none sent; see benchmarks.runner)."""

from __future__ import annotations

from .checkpoints import time_checkpoint
from .common import Context, Measurement
from .dcp_ranks import THREAD_COUNT, dcp_workload
from .uploads import Objects, time_uploads

CONFIGURATION = (
    "writes: IterableWrapper((url, data) items).save_by_fsspec(mode='wb'), s3fs defaults (one object at a "
    "time, 50 MiB blocks); checkpoint: torch.save/torch.load on fsspec.open(url, 'wb'/'rb'); dcp: "
    f"FsspecWriter(sync_files=False, thread_count={THREAD_COUNT}) / FsspecReader; request checksums "
    "when_required"
)


def _storage_options(ctx: Context) -> dict:
    return {"client_kwargs": {"endpoint_url": ctx.endpoint_url, "region_name": ctx.region}}


def _save_all(ctx: Context):  # type: ignore[no-untyped-def]
    import warnings

    from torch.utils.data.datapipes.iter import IterableWrapper

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import torchdata.datapipes  # noqa: F401  registers save_by_fsspec

    def save_all(objects: Objects) -> None:
        for _path in IterableWrapper(objects).save_by_fsspec(mode="wb", **_storage_options(ctx)):
            pass

    return save_all


def upload_large(ctx: Context) -> Measurement:
    return time_uploads(ctx, _save_all(ctx))


upload_small = upload_large


def checkpoint(ctx: Context) -> Measurement:
    import fsspec
    import torch

    options = _storage_options(ctx)

    def save(state: dict, url: str) -> None:
        with fsspec.open(url, "wb", **options) as stream:
            torch.save(state, stream)

    def load(url: str) -> dict:
        with fsspec.open(url, "rb", **options) as stream:
            return torch.load(stream, map_location="cpu")

    return time_checkpoint(ctx, save, load)


def dcp_storage_writer(ctx: Context, url: str):  # type: ignore[no-untyped-def]
    from torch.distributed.checkpoint._fsspec_filesystem import FsspecWriter

    # sync_files=False: an S3 file has no fileno(), and torch then calls os.sync() for the whole machine.
    return FsspecWriter(url, sync_files=False, thread_count=THREAD_COUNT, **_storage_options(ctx))


def dcp_storage_reader(ctx: Context, url: str):  # type: ignore[no-untyped-def]
    from torch.distributed.checkpoint._fsspec_filesystem import FsspecReader

    return FsspecReader(url, **_storage_options(ctx))


dcp = dcp_workload(__name__)
