"""s3fs's write workloads: ``pipe_file`` per large object, ``pipe`` (its bulk call) for small ones, a file
opened for writing for the stream. Imported by :mod:`s3fs_direct`. Request checksums: when_required (none
sent; see benchmarks.runner)."""

from __future__ import annotations

from typing import IO

import s3fs

from .common import Context, Measurement, MiB
from .uploads import Objects, time_stream, time_uploads, write_pieces

# pipe_file's default part size (50 MiB) sends a 64 MiB object as one PutObject on one connection; 8 MiB
# parts (the others' size) let its max_concurrency (10, the default) send them in parallel.
PART_BYTES = 8 * MiB
# pipe() runs up to 128 pipe_file calls at once (fsspec's batch size), over aiobotocore's pool of 10
# connections by default: given as many connections as ours keeps objects in flight.
CONNECTIONS = 64

CONFIGURATION = (
    f"writes: pipe_file(path, data, chunksize=8 MiB) per object, max_concurrency=10 (upload-large); "
    f"pipe({{path: data}}) of all, max_pool_connections={CONNECTIONS} (upload-small); "
    "open(path, 'wb') + write(1 MiB), default 50 MiB blocks (upload-stream); request checksums when_required"
)


def filesystem(ctx: Context) -> s3fs.S3FileSystem:
    return s3fs.S3FileSystem(
        skip_instance_cache=True,
        client_kwargs={"endpoint_url": ctx.endpoint_url, "region_name": ctx.region},
        config_kwargs={"max_pool_connections": CONNECTIONS},
    )


def _path(url: str) -> str:
    return url[len("s3://") :]


def upload_large(ctx: Context) -> Measurement:
    fs = filesystem(ctx)

    def upload(objects: Objects) -> None:
        for url, data in objects:
            fs.pipe_file(_path(url), data, chunksize=PART_BYTES)

    return time_uploads(ctx, upload)


def upload_small(ctx: Context) -> Measurement:
    fs = filesystem(ctx)
    return time_uploads(ctx, lambda objects: fs.pipe({_path(url): data for url, data in objects}))


def upload_stream(ctx: Context) -> Measurement:
    fs = filesystem(ctx)

    def open_writer(url: str) -> IO[bytes]:
        return fs.open(_path(url), "wb")

    return time_stream(ctx, write_pieces(open_writer))
