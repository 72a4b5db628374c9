"""The upload workloads' timed sections, shared by every adapter: what is in memory before the clock, what
the clock covers, and the measurement. An adapter supplies only its own calls.

- ``upload-large`` / ``upload-small``: the dataset's objects are read into memory first; the clock covers the
  adapter's ``upload(objects)``, which must have committed every object when it returns.
- ``upload-stream``: one huge object, its file opened first; the clock covers reading it in 1 MiB pieces and
  writing each to the client's writer (or, for a client whose idiom is to be handed the file, handing it).

The peak RSS is reset after the set-up (see common.reset_peak_rss), so the RSS growth reported is the
client's own: buffers and copies, not the data it was given.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Callable

from benchmarks.writes import destination_url, source_objects, source_path

from .common import READ_SIZE, Context, Measurement, Stopwatch, reset_peak_rss

Objects = list[tuple[str, bytes]]  # (destination s3:// URL, content)


def time_uploads(ctx: Context, upload: Callable[[Objects], None]) -> Measurement:
    """Times ``upload(objects)`` over the dataset's objects, read into memory before the clock."""
    objects = source_objects(ctx)
    reset_peak_rss()
    with Stopwatch() as watch:
        upload(objects)
    total = sum(len(data) for _url, data in objects)
    return Measurement(len(objects), total, watch.seconds, None, watch.cpu_seconds)


def pieces(source: IO[bytes]) -> Iterator[bytes]:
    """The file's content in READ_SIZE pieces, as a program producing a stream would write them."""
    while True:
        piece = source.read(READ_SIZE)
        if not piece:
            return
        yield piece


def time_stream(ctx: Context, upload: Callable[[str, IO[bytes]], None]) -> Measurement:
    """Times ``upload(url, source)``: one huge object from its open file (read inside the clock)."""
    [key] = ctx.keys
    path = source_path(ctx, key)
    size = path.stat().st_size
    with open(path, "rb") as source:
        reset_peak_rss()
        with Stopwatch() as watch:
            upload(destination_url(ctx, key), source)
    return Measurement(1, size, watch.seconds, None, watch.cpu_seconds)


def write_pieces(open_writer: Callable[[str], IO[bytes]]) -> Callable[[str, IO[bytes]], None]:
    """An ``upload`` for :func:`time_stream` of a client with a file-like writer: ``write()`` per piece."""

    def upload(url: str, source: IO[bytes]) -> None:
        with open_writer(url) as writer:
            for piece in pieces(source):
                writer.write(piece)

    return upload


def one_at_a_time(open_writer: Callable[[str], IO[bytes]]) -> Callable[[Objects], None]:
    """An ``upload`` for :func:`time_uploads`: each object through its own writer, in turn."""

    def upload(objects: Objects) -> None:
        for url, data in objects:
            with open_writer(url) as writer:
                writer.write(data)

    return upload


def in_thread_pool(put: Callable[[str, bytes], None], workers: int) -> Callable[[Objects], None]:
    """An ``upload`` for :func:`time_uploads`: ``put(url, data)`` for every object from a thread pool of
    `workers` (how boto3 and s3torchconnector users upload many objects); the first failure raises."""

    def upload(objects: Objects) -> None:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=workers) as pool:
            for done in [pool.submit(put, url, data) for url, data in objects]:
                done.result()

    return upload
