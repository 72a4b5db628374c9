"""The ceiling: curl fetching the same objects with parallel ranged GETs into /dev/null (no client logic); for
the upload workloads, curl PUTting each object's file whole, in parallel (no multipart, no signing)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from urllib.parse import quote

from benchmarks.writes import destination_key, source_path

from .common import Context, Measurement, Stopwatch

NAME = "raw-http"
CONFIGURATION = (
    "curl --parallel --parallel-max 16, 8 MiB ranges, output discarded; uploads: one unsigned PUT of each "
    "object's file (curl --upload-file), --parallel-max 16 (large) or 64 (small: ours' objects in flight)"
)

PART = 8 * 1024 * 1024


def _run_curl(transfers: list[str], parallel: int, items: int, total: int) -> Measurement:
    """Times one curl running `transfers` (curl config blocks), `parallel` at once."""
    curl = shutil.which("curl")
    if curl is None:
        raise RuntimeError("curl is not installed")
    with tempfile.NamedTemporaryFile("w", suffix=".curl") as config:
        # `range` and `fail` are per-transfer options: without `next` between transfers, the last range in
        # the file applied to every URL (the ceiling fetched far less than it counted, until the endpoint's
        # access log showed it). --parallel still runs every transfer at once.
        config.write("next\n".join(transfers))
        config.flush()
        command = [curl, "--silent", "--fail", "--parallel", "--parallel-max", str(parallel)]
        with Stopwatch() as watch:
            subprocess.run([*command, "--config", config.name], check=True)
    return Measurement(items, total, watch.seconds, None, watch.cpu_seconds)


def _fetch(ctx: Context, sizes: list[int]) -> Measurement:
    transfers = []
    for url, size in zip(ctx.http_urls(), sizes):
        for start in range(0, max(size, 1), PART):
            end = min(size, start + PART) - 1
            piece = f"{start}-{max(end, start)}"
            transfers.append(f'url = "{url}"\noutput = "/dev/null"\nrange = "{piece}"\nfail\n')
    return _run_curl(transfers, 16, len(sizes), sum(sizes))


def large(ctx: Context) -> Measurement:
    return _fetch(ctx, ctx.sizes)


def small(ctx: Context) -> Measurement:
    return _fetch(ctx, ctx.sizes)


whole = large  # curl writes to /dev/null either way


def _put(ctx: Context, parallel: int) -> Measurement:
    """Every object's dataset file PUT whole to its destination, `parallel` at once: the endpoint's write
    path with no client logic. The content check reads back what landed, as for every client."""
    transfers = [
        f'url = "{ctx.endpoint_url}/{ctx.bucket}/{quote(destination_key(ctx, key))}"\n'
        f'upload-file = "{source_path(ctx, key)}"\noutput = "/dev/null"\nfail\n'
        for key in ctx.keys
    ]
    return _run_curl(transfers, parallel, len(ctx.keys), sum(ctx.sizes))


def upload_large(ctx: Context) -> Measurement:
    return _put(ctx, 16)


def upload_small(ctx: Context) -> Measurement:
    return _put(ctx, 64)
