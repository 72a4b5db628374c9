"""fsspec's local caches over s3fs, for the `epochs` workload: ``filecache`` (whole files kept in a directory
with a metadata file, across processes; never checked against the remote by default) and ``simplecache``
(whole files, no metadata, nothing checked). One filesystem object for all the epochs, as a training job
keeps one; ``fs.open(path, "rb")`` + ``read(1 MiB)`` per object. The two client modules pick the protocol."""

from __future__ import annotations

import fsspec

from .common import Context, Measurement
from .epochs import cache_directory, consume_epochs


def read_epochs(ctx: Context, protocol: str) -> Measurement:
    with cache_directory(ctx) as directory:
        fs = fsspec.filesystem(
            protocol,
            target_protocol="s3",
            target_options={
                "skip_instance_cache": True,
                "client_kwargs": {"endpoint_url": ctx.endpoint_url, "region_name": ctx.region},
            },
            cache_storage=directory,
            skip_instance_cache=True,
        )

        def open_epoch():  # type: ignore[no-untyped-def]
            for key in ctx.keys:
                yield key, fs.open(f"{ctx.bucket}/{key}", "rb")

        return consume_epochs(open_epoch, ctx)
