"""The `epochs` workload's ceiling: the dataset's own files, the ones the endpoint serves, read straight from
local disk with ``open(path, "rb")`` and ``read(1 MiB)``, listed with ``os.scandir`` each epoch as a loader
lists its prefix. What a perfect cache could at best do."""

from __future__ import annotations

import os

from .common import Context, Measurement
from .epochs import consume_epochs

NAME = "local-disk"
CONFIGURATION = "open(path, 'rb') + read(1 MiB) of the dataset's files on local disk, listed with os.scandir"


def epochs(ctx: Context) -> Measurement:
    folder = os.path.join(ctx.local_dir, ctx.bucket, ctx.prefix)

    def open_epoch():  # type: ignore[no-untyped-def]
        for entry in sorted(os.scandir(folder), key=lambda entry: entry.name):
            yield entry.path, open(entry.path, "rb")  # noqa: SIM115 (the consumer closes it)

    return consume_epochs(open_epoch, ctx)
