"""The `epochs` workload's shared part: the same dataset read several times, each pass timed on its own, by a
client whose cache (or none) persists from one pass to the next.

The reported figure is the later epochs' (the median of their seconds; with two epochs, the second's); the
first epoch's seconds, and every epoch's CPU seconds, are in ``extra``. Each pass must read every object
whole, and every pass the same content: a cache that served a wrong byte fails the content check.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import tempfile
from collections.abc import Iterable, Iterator
from typing import IO, Any, Callable

from .common import Context, Digest, Measurement, Stopwatch, read_stream

# One epoch's objects: (name, binary file object) pairs, each read to its end and closed by the consumer.
Epoch = Callable[[], Iterable[tuple[str, IO[bytes]]]]


def consume_epochs(open_epoch: Epoch, ctx: Context) -> Measurement:
    """Times ``ctx.epochs`` passes of ``open_epoch()`` (see the module docstring)."""
    seconds: list[float] = []
    cpu: list[float] = []
    digests: list[Any] = []
    sizes: list[tuple[int, int]] = []
    for _epoch in range(ctx.epochs):
        digest = Digest(ctx.verify)
        objects = total = 0
        with Stopwatch() as watch:
            for _name, stream in open_epoch():
                try:
                    total += read_stream(stream.read, digest)
                finally:
                    stream.close()
                objects += 1
        seconds.append(watch.seconds)
        cpu.append(watch.cpu_seconds)
        digests.append(digest.value())
        sizes.append((objects, total))
    if len(set(sizes)) != 1 or len(set(digests)) != 1:
        raise RuntimeError(f"the epochs read different data: (objects, bytes) {sizes}, digests {digests}")
    objects, total = sizes[0]
    return Measurement(
        objects,
        total,
        statistics.median(seconds[1:]),
        digests[0],
        statistics.median(cpu[1:]),
        extra={"epoch_seconds": seconds, "epoch_cpu_seconds": cpu},
    )


@contextlib.contextmanager
def cache_directory(ctx: Context) -> Iterator[str]:
    """A fresh, empty cache directory for one measurement, on the disk of the dataset's local copy (so that
    a cache and the local-disk ceiling read from the same disk), deleted afterwards."""
    parent = os.path.join(ctx.local_dir, "epoch-caches") if ctx.local_dir else None
    if parent:
        os.makedirs(parent, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cache-", dir=parent) as directory:
        yield directory
