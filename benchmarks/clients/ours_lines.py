"""A variant of ours beside the headline figure: each object iterated line by line (``for line in stream``),
as code reading text or JSON lines does (issue 22: within 0.9 of read_chunk()). The benchmark's objects are
random bytes: a line ends every 256 bytes on average, far shorter than text's, so this is the harder case."""

from __future__ import annotations

import zlib

from .common import Context, Digest, Measurement, Stopwatch
from .ours import loader

NAME = "torchdata_s3-lines"
CONFIGURATION = "the same S3FileLoader as torchdata_s3; for line in stream, to the end"


def _read_objects(ctx: Context) -> Measurement:
    digest = Digest(ctx.verify)
    objects = total = 0
    streams = loader(ctx)
    with Stopwatch() as watch:
        for _url, stream in streams:
            crc = 0
            for line in stream:
                total += len(line)
                if digest.enabled:
                    crc = zlib.crc32(line, crc)
            if digest.enabled:
                digest.add(crc)
            objects += 1
    return Measurement(objects, total, watch.seconds, digest.value(), watch.cpu_seconds)


large = _read_objects
small = _read_objects
