"""The `ranges` and `cat` workloads' shared part: fsspec's bulk reads, timed through the file system's own
call (``cat_ranges``, ``cat``), the same for every client that is an fsspec file system."""

from __future__ import annotations

import random
import zlib
from typing import Any

from .common import Context, Digest, Measurement, Stopwatch

RANGE_COUNT = 1000
RANGE_BYTES = 16 * 1024
SEED = 23  # the number: the same ranges in every run


def pick(size: int) -> list[list[int]]:
    """RANGE_COUNT ``[start, end)`` ranges of RANGE_BYTES at random offsets of an object of ``size`` bytes."""
    rng = random.Random(SEED)
    starts = [rng.randrange(0, size - RANGE_BYTES) for _ in range(RANGE_COUNT)]
    return [[start, start + RANGE_BYTES] for start in starts]


def digest(data: bytes, ranges: list[list[int]]) -> int:
    total = Digest(True)
    for start, end in ranges:
        total.add(zlib.crc32(data[start:end]))
    value = total.value()
    assert value is not None
    return value


def cat_ranges(fs: Any, ctx: Context) -> Measurement:
    """Times one ``fs.cat_ranges`` of the case's ranges of its one object."""
    ranges = ctx.selection["ranges"]
    paths = [f"{ctx.bucket}/{ctx.keys[0]}"] * len(ranges)
    starts = [start for start, _ in ranges]
    ends = [end for _, end in ranges]
    check = Digest(ctx.verify)
    with Stopwatch() as watch:
        pieces = fs.cat_ranges(paths, starts, ends)
    total = 0
    for piece in pieces:
        total += len(piece)
        if check.enabled:
            check.add(zlib.crc32(piece))
    return Measurement(len(pieces), total, watch.seconds, check.value(), watch.cpu_seconds)


def cat(fs: Any, ctx: Context) -> Measurement:
    """Times one ``fs.cat`` of every object of the case (a dict path -> bytes)."""
    paths = [f"{ctx.bucket}/{key}" for key in ctx.keys]
    check = Digest(ctx.verify)
    with Stopwatch() as watch:
        blobs = fs.cat(paths)
    total = 0
    for path in paths:
        blob = blobs[path]
        total += len(blob)
        if check.enabled:
            check.add(zlib.crc32(blob))
    return Measurement(len(blobs), total, watch.seconds, check.value(), watch.cpu_seconds)
