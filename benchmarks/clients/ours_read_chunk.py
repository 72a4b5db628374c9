"""A variant of ours beside the headline figure: each object drained with read_chunk() (the next downloaded
block as a zero-copy buffer) instead of read(). Never the headline: user code calls read()."""

from __future__ import annotations

from .common import Context, Measurement, consume_pieces
from .ours import loader

NAME = "torchdata_s3-read_chunk"
CONFIGURATION = "the same S3FileLoader as torchdata_s3; stream.read_chunk() until None (no copy)"


def _read_objects(ctx: Context) -> Measurement:
    streams = loader(ctx)  # the client is built here, before the clock, as for every adapter
    return consume_pieces(streams, ctx, lambda stream: iter(stream.read_chunk, None))


large = _read_objects
small = _read_objects
