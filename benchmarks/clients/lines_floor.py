"""Line iteration's floor (issue 22; a reference row, not a peer): each object's bytes, read from the files
the endpoint serves into memory before the clock starts, iterated line by line from ``io.BytesIO`` with the
loop ``torchdata_s3-lines`` runs over its streams. No S3, no network, no copy into a buffer: what CPython's
cost per line allows on this machine in the same run, the bound of any ``for line in stream`` a client
yields."""

from __future__ import annotations

import io
from pathlib import Path

from .common import Context, Measurement, consume_pieces

NAME = "lines-floor"
CONFIGURATION = (
    "for line in io.BytesIO(object) over the dataset's files read into memory outside the clock (RSS holds "
    "them all); the same loop as torchdata_s3-lines, no S3"
)


def _lines_in_memory(ctx: Context) -> Measurement:
    if not ctx.local_dir:
        raise ValueError(
            "the lines floor reads the dataset's own files: it needs the harness's data directory"
        )
    folder = Path(ctx.local_dir) / ctx.bucket
    loaded = [(url, (folder / key).read_bytes()) for url, key in zip(ctx.urls(), ctx.keys)]
    return consume_pieces(((url, io.BytesIO(data)) for url, data in loaded), ctx, lambda stream: stream)


large = _lines_in_memory
small = _lines_in_memory
