"""torchdata_s3 without its local cache, in the `epochs` workload: what the cache is measured against (its
first epoch should cost little more than this; its later epochs should leave this far behind)."""

from __future__ import annotations

from .common import Context, Measurement
from .ours import read_epochs

NAME = "torchdata_s3-nocache"
CONFIGURATION = "as torchdata_s3, without cache_dir: every epoch reads from the endpoint"


def epochs(ctx: Context) -> Measurement:
    return read_epochs(ctx, cache=False)
