"""fsspec's ``filecache`` over s3fs (see benchmarks.clients.fsspec_cached): the `epochs` workload only."""

from __future__ import annotations

from .common import Context, Measurement
from .fsspec_cached import read_epochs

NAME = "fsspec-filecache"
CONFIGURATION = "fsspec.filesystem('filecache', target_protocol='s3', cache_storage=DIR); open + read(1 MiB)"


def epochs(ctx: Context) -> Measurement:
    return read_epochs(ctx, "filecache")
