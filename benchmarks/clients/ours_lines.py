"""A variant of ours beside the headline figure: each object iterated line by line (``for line in stream``),
as code reading text or JSON lines does (issue 22: within 0.9 of read_chunk()). The benchmark's objects are
random bytes: a line ends every 256 bytes on average, far shorter than text's, so this is the harder case."""

from __future__ import annotations

from .common import Context, Measurement, consume_pieces
from .ours import loader

NAME = "torchdata_s3-lines"
CONFIGURATION = "the same S3FileLoader as torchdata_s3; for line in stream, to the end"


def _read_objects(ctx: Context) -> Measurement:
    return consume_pieces(loader(ctx), ctx, lambda stream: stream)  # iterating a stream yields its lines


large = _read_objects
small = _read_objects
