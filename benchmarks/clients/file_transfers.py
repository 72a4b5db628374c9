"""The `get-file` and `put-file` workloads' timed sections (issue 23): one huge object between S3 and a local
file, through each client's own one-call transfer (fsspec's ``get_file``/``put_file``, boto3's
``download_file``/``upload_file``). An adapter supplies only its call.

- ``get-file``: the clock covers the call that downloads the object to a local file (in the harness's data
  directory, on the same disk as the endpoint's files); the content check reads that file after the clock,
  and the file is deleted.
- ``put-file``: the clock covers the call that uploads the dataset's file; the harness reads the object back
  after the clock (see benchmarks.writes).
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path
from typing import Any, Callable

from benchmarks.writes import destination_url, source_path

from .common import Context, Digest, Measurement, Stopwatch, reset_peak_rss

CRC_PIECE_BYTES = 64 * 1024 * 1024


def time_get_file(ctx: Context, download: Callable[[str, str], None]) -> Measurement:
    """Times ``download(url, local_path)`` of the case's one object."""
    [key] = ctx.keys
    target = Path(ctx.local_dir) / "get-file" / f"{os.getpid()}.bin"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)
    reset_peak_rss()
    try:
        with Stopwatch() as watch:
            download(f"s3://{ctx.bucket}/{key}", str(target))
        size = target.stat().st_size
        digest = Digest(ctx.verify)
        if digest.enabled:
            crc = 0
            with open(target, "rb") as downloaded:
                while piece := downloaded.read(CRC_PIECE_BYTES):
                    crc = zlib.crc32(piece, crc)
            digest.add(crc)
    finally:
        target.unlink(missing_ok=True)
    return Measurement(1, size, watch.seconds, digest.value(), watch.cpu_seconds)


def time_put_file(ctx: Context, upload: Callable[[str, str], None]) -> Measurement:
    """Times ``upload(local_path, url)`` of the case's one dataset file."""
    [key] = ctx.keys
    path = source_path(ctx, key)
    reset_peak_rss()
    with Stopwatch() as watch:
        upload(str(path), destination_url(ctx, key))
    return Measurement(1, path.stat().st_size, watch.seconds, None, watch.cpu_seconds)


def bucket_path(url: str) -> str:
    """``bucket/key`` of ``s3://bucket/key``: what fsspec file systems take."""
    return url[len("s3://") :]


def fsspec_get_file(fs: Any, ctx: Context) -> Measurement:
    """``get-file`` through an fsspec file system's ``get_file``."""
    return time_get_file(ctx, lambda url, path: fs.get_file(bucket_path(url), path))


def fsspec_put_file(fs: Any, ctx: Context) -> Measurement:
    """``put-file`` through an fsspec file system's ``put_file``."""
    return time_put_file(ctx, lambda path, url: fs.put_file(path, bucket_path(url)))
