"""A variant of ours beside the headline figure: each object drained with read_chunk() (the next downloaded
block as a zero-copy buffer) instead of read(). Never the headline: user code calls read()."""

from __future__ import annotations

import zlib

from .common import Context, Digest, Measurement, Stopwatch
from .ours import loader

NAME = "torchdata_s3-read_chunk"
CONFIGURATION = "the same S3FileLoader as torchdata_s3; stream.read_chunk() until None (no copy)"


def _read_objects(ctx: Context) -> Measurement:
    digest = Digest(ctx.verify)
    objects = total = 0
    streams = loader(ctx)  # the client is built here, before the clock, as for every adapter
    with Stopwatch() as watch:
        for _url, stream in streams:
            crc = 0
            while (chunk := stream.read_chunk()) is not None:
                total += len(chunk)
                if digest.enabled:
                    crc = zlib.crc32(chunk, crc)
            if digest.enabled:
                digest.add(crc)
            objects += 1
    return Measurement(objects, total, watch.seconds, digest.value(), watch.cpu_seconds)


large = _read_objects
small = _read_objects
