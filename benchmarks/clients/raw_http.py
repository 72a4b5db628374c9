"""The ceiling: curl fetching the same objects with parallel ranged GETs into /dev/null (no client logic)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile

from .common import Context, Measurement, Stopwatch

NAME = "raw-http"
CONFIGURATION = "curl --parallel --parallel-max 16, 8 MiB ranges, output discarded"

PART = 8 * 1024 * 1024


def _fetch(ctx: Context, sizes: list[int]) -> Measurement:
    curl = shutil.which("curl")
    if curl is None:
        raise RuntimeError("curl is not installed")
    lines = []
    for url, size in zip(ctx.http_urls(), sizes):
        for start in range(0, max(size, 1), PART):
            end = min(size, start + PART) - 1
            lines.append(f'url = "{url}"\noutput = "/dev/null"\nrange = "{start}-{max(end, start)}"\nfail\n')
    with tempfile.NamedTemporaryFile("w", suffix=".curl") as config:
        # `range` and `fail` are per-transfer options: without `next` between transfers, the last range in
        # the file applied to every URL (the ceiling fetched far less than it counted, until the endpoint's
        # access log showed it). --parallel still runs every transfer at once.
        config.write("next\n".join(lines))
        config.flush()
        with Stopwatch() as watch:
            subprocess.run(
                [curl, "--silent", "--fail", "--parallel", "--parallel-max", "16", "--config", config.name],
                check=True,
            )
    return Measurement(len(sizes), sum(sizes), watch.seconds, None, watch.cpu_seconds)


def large(ctx: Context) -> Measurement:
    return _fetch(ctx, ctx.sizes)


def small(ctx: Context) -> Measurement:
    return _fetch(ctx, ctx.sizes)
