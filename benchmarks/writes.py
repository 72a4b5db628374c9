"""What the write workloads share: where a measurement writes, the data it writes, and reading it back.

Every measurement of a write workload writes under a prefix of its own, ``writes/<workload>/<client>-<pid>/``
(set by :mod:`benchmarks.measure`), and the harness deletes that prefix afterwards, outside the clock. The
content check reads back what was written, never through the client under test: from the embedded endpoint's
data directory (``ctx.served_dir``, where objects land as ``<bucket>/<key>``), or else with plain boto3 GETs.
"""

from __future__ import annotations

import os
import shutil
import zlib
from collections.abc import Iterator
from pathlib import Path

from benchmarks.clients.common import Context, Digest

WRITES_ROOT = "writes/"


def measurement_prefix(workload: str, client: str) -> str:
    """The fresh prefix one measurement writes under."""
    return f"{WRITES_ROOT}{workload}/{client}-{os.getpid()}/"


def destination_key(ctx: Context, source_key: str) -> str:
    """Where a dataset object is uploaded: under the measurement's prefix, its dataset key kept."""
    return f"{ctx.prefix}{source_key}"


def destination_url(ctx: Context, source_key: str) -> str:
    return f"s3://{ctx.bucket}/{destination_key(ctx, source_key)}"


def source_path(ctx: Context, source_key: str) -> Path:
    """The dataset file behind `source_key` in the harness's data directory."""
    return Path(ctx.local_dir) / ctx.bucket / source_key


def source_objects(ctx: Context) -> list[tuple[str, bytes]]:
    """``(destination URL, content)`` of every object to upload, read into memory (before the clock)."""
    return [(destination_url(ctx, key), source_path(ctx, key).read_bytes()) for key in ctx.keys]


def checkpoint_url(ctx: Context) -> str:
    """The `checkpoint` workload's object, or the `dcp` workload's checkpoint prefix."""
    return f"s3://{ctx.bucket}/{ctx.prefix}checkpoint"


def _s3_client(ctx: Context):  # type: ignore[no-untyped-def]
    import boto3

    return boto3.client("s3", endpoint_url=ctx.endpoint_url, region_name=ctx.region)


def written_objects(ctx: Context) -> Iterator[tuple[str, bytes]]:
    """Every object under the measurement's prefix, one at a time: ``(key below the prefix, content)``."""
    if ctx.served_dir:
        root = Path(ctx.served_dir) / ctx.bucket / ctx.prefix
        for path in sorted(root.rglob("*")):
            if path.is_file():
                yield str(path.relative_to(root)), path.read_bytes()
        return
    s3 = _s3_client(ctx)
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=ctx.bucket, Prefix=ctx.prefix):
        for entry in page.get("Contents", []):
            body = s3.get_object(Bucket=ctx.bucket, Key=entry["Key"])["Body"].read()
            yield entry["Key"][len(ctx.prefix) :], body


def read_back_digest(ctx: Context) -> int:
    """The content digest of what the measurement left under its prefix (sum of crc32 per object), to compare
    with the dataset's. Objects under other names, or missing, change it too: the count is in the sum."""
    digest = Digest(True)
    expected = {destination_key(ctx, key)[len(ctx.prefix) :] for key in ctx.keys}
    for name, content in written_objects(ctx):
        # A stray object (a wrong key) must not cancel a missing one out: mix the name in when unexpected.
        crc = zlib.crc32(content)
        digest.add(crc if name in expected else zlib.crc32(name.encode(), crc))
    return digest.total


def delete_written(ctx: Context) -> None:
    """Deletes everything under the measurement's prefix: through S3 (DeleteObjects per listed page), so that
    the endpoint's own index of keys forgets them too; then, for the embedded endpoint, the directory itself
    (empty directories, and anything a failed request left on its disk)."""
    if not ctx.prefix.startswith(WRITES_ROOT):
        raise ValueError(f"refusing to delete {ctx.prefix!r}: not a measurement's write prefix")
    s3 = _s3_client(ctx)
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=ctx.bucket, Prefix=ctx.prefix):
        keys = [{"Key": entry["Key"]} for entry in page.get("Contents", [])]
        if keys:
            s3.delete_objects(Bucket=ctx.bucket, Delete={"Objects": keys, "Quiet": True})
    if ctx.served_dir:
        shutil.rmtree(Path(ctx.served_dir) / ctx.bucket / ctx.prefix, ignore_errors=True)
