"""A variant of ours beside the headline figure: load_files_by_s3 of the dataset's prefix instead of its list
of URLs. The listing gives each object's size, so an object that fits in one part is fetched with one GET of
its size and received straight into the bytes its read() returns (docs/streams.md); the listing itself is
inside the clock, as the loader lists while it loads."""

from __future__ import annotations

from torch.utils.data.datapipes.iter import IterableWrapper

import torchdata_s3

from . import ours
from .common import Context, Measurement, consume_objects
from .dataset_loaders import prefix_url

NAME = "torchdata_s3-prefix"
CONFIGURATION = (
    "S3FileLoader(IterableWrapper([prefix])) with the defaults of torchdata_s3 (listed inside the clock); "
    "stream.read(1 MiB) to the end of each object"
)


def _read_prefix(ctx: Context) -> Measurement:
    loader = torchdata_s3.S3FileLoader(IterableWrapper([prefix_url(ctx)]), config=ours._config(ctx))
    return consume_objects(loader, ctx)


large = _read_prefix
small = _read_prefix
