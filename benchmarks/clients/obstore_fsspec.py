"""obstore's fsspec adapter (``obstore.fsspec.FsspecStore``, documented as best effort; used synchronously
here, as fsspec's callers do): the `ranges` and `cat` workloads, through its own cat_ranges and cat(list)."""

from __future__ import annotations

from typing import Any

from obstore.fsspec import FsspecStore

from . import fsspec_ranges
from .common import Context, Measurement
from .file_transfers import fsspec_get_file, fsspec_put_file

NAME = "obstore-fsspec"
CONFIGURATION = (
    "FsspecStore('s3', endpoint, path style, allow_http, dummy credentials), synchronous; its cat_ranges, "
    "cat, get_file, put_file"
)


def filesystem(ctx: Context) -> Any:
    return FsspecStore(
        "s3",
        config={
            "endpoint": ctx.endpoint_url,
            "region": ctx.region,
            "access_key_id": "benchmark",  # the local endpoints ignore credentials
            "secret_access_key": "benchmark",
            "virtual_hosted_style_request": False,
        },
        client_options={"allow_http": True},
        asynchronous=False,
        skip_instance_cache=True,
    )


def ranges(ctx: Context) -> Measurement:
    return fsspec_ranges.cat_ranges(filesystem(ctx), ctx)


def cat(ctx: Context) -> Measurement:
    return fsspec_ranges.cat(filesystem(ctx), ctx)


def get_file(ctx: Context) -> Measurement:
    return fsspec_get_file(filesystem(ctx), ctx)


def put_file(ctx: Context) -> Measurement:
    return fsspec_put_file(filesystem(ctx), ctx)
