"""obstore (Python bindings of Rust's object_store): ``obstore.list`` for listing-scale."""

from __future__ import annotations

import obstore
from obstore.store import S3Store

from .common import Context, Measurement, consume_listing

NAME = "obstore"
CONFIGURATION = (
    "S3Store(endpoint, path style, allow_http, dummy credentials); obstore.list(store, prefix) iterated "
    "chunk by chunk (its default chunk_size=50)"
)


def store(ctx: Context) -> S3Store:
    return S3Store(
        ctx.bucket,
        endpoint=ctx.endpoint_url,
        region=ctx.region,
        access_key_id="benchmark",  # the local endpoints ignore credentials; these keep it from looking
        secret_access_key="benchmark",
        virtual_hosted_style_request=False,
        client_options={"allow_http": True},
    )


def listing_scale(ctx: Context) -> Measurement:
    s3 = store(ctx)

    def keys():  # type: ignore[no-untyped-def]
        for chunk in obstore.list(s3, prefix=ctx.prefix):
            for meta in chunk:
                yield meta["path"]

    return consume_listing(keys(), ctx)
