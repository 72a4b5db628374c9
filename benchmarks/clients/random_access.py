"""The `random` workload's shared part: reads that seek, through whatever file object a client's ``open``
gives. One column of a many-column Parquet file (``pyarrow.parquet.ParquetFile(f).read(columns=...)``: the
footer at the end, then that column's chunk in each row group), or a few members of a large zip
(``zipfile.ZipFile(f)``: the central directory at the end, then each member's header and data).

The figure is seconds; the endpoint's access log says how many bytes each client fetched to do it.
"""

from __future__ import annotations

import zipfile
import zlib
from typing import IO, Callable

from .common import Context, Digest, Measurement, Stopwatch


def read_selection(open_file: Callable[[str], IO[bytes]], ctx: Context) -> Measurement:
    """Times opening ``ctx.keys[0]`` with ``open_file(url)`` and reading ``ctx.selection`` from it."""
    import pyarrow.parquet as parquet

    from benchmarks.generate import parquet_column_digest

    [url] = ctx.urls()
    kind = ctx.selection["format"]
    digest = Digest(ctx.verify)
    with Stopwatch() as watch, open_file(url) as file:
        if kind == "parquet":
            table = parquet.ParquetFile(file).read(columns=ctx.selection["columns"])
            items, delivered = table.num_rows, table.nbytes
            if digest.enabled:
                digest.add(parquet_column_digest(table))
        elif kind == "zip":
            items = delivered = 0
            with zipfile.ZipFile(file) as archive:
                for member in ctx.selection["members"]:
                    data = archive.read(member)
                    items += 1
                    delivered += len(data)
                    if digest.enabled:
                        digest.add(zlib.crc32(data))
        else:
            raise ValueError(f"unknown selection format {kind!r}")
    return Measurement(items, delivered, watch.seconds, digest.value(), watch.cpu_seconds)
