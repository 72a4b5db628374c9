"""obstore (Python bindings of Rust's object_store), as its docs show it: ``obstore.get(store, key).bytes()``
for reads, ``obstore.put(store, key, data)`` for writes, ``obstore.list`` for listing-scale (issue 22 asks
for it as a read and write peer; issue 21 as a listing peer)."""

from __future__ import annotations

import obstore
from obstore.store import S3Store

from .common import Context, Measurement, bucket_and_key, consume_bytes_objects, consume_listing
from .uploads import in_thread_pool, time_uploads

NAME = "obstore"
# Many small objects: a thread pool of put() calls on the one store (its sync calls release the GIL while
# its Rust runtime works), as many as ours and s3torchconnector keep in flight.
SMALL_OBJECT_WORKERS = 64
CONFIGURATION = (
    "S3Store(endpoint, path style, allow_http, dummy credentials); reads: obstore.get(store, key).bytes() "
    "per object, in turn; writes: obstore.put(store, key, data) per object (its default multipart above "
    f"its chunk size), in turn (upload-large) or from ThreadPoolExecutor({SMALL_OBJECT_WORKERS}) "
    "(upload-small); obstore.list(store, prefix) iterated chunk by chunk (its default chunk_size=50)"
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


def _read_objects(ctx: Context) -> Measurement:
    s3 = store(ctx)

    def blobs():  # type: ignore[no-untyped-def]
        for key in ctx.keys:
            yield obstore.get(s3, key).bytes()

    return consume_bytes_objects(blobs(), ctx)


large = _read_objects
small = _read_objects
whole = _read_objects  # obstore's read is whole already


def _key_of(ctx: Context, url: str) -> str:
    bucket, key = bucket_and_key(url)
    if bucket != ctx.bucket:
        raise ValueError(f"{url} is not in the store's bucket {ctx.bucket}")
    return key


def upload_large(ctx: Context) -> Measurement:
    s3 = store(ctx)

    def upload(objects: list[tuple[str, bytes]]) -> None:
        for url, data in objects:
            obstore.put(s3, _key_of(ctx, url), data)

    return time_uploads(ctx, upload)


def upload_small(ctx: Context) -> Measurement:
    s3 = store(ctx)

    def put(url: str, data: bytes) -> None:
        obstore.put(s3, _key_of(ctx, url), data)

    return time_uploads(ctx, in_thread_pool(put, SMALL_OBJECT_WORKERS))


def listing_scale(ctx: Context) -> Measurement:
    s3 = store(ctx)

    def keys():  # type: ignore[no-untyped-def]
        for chunk in obstore.list(s3, prefix=ctx.prefix):
            for meta in chunk:
                yield meta["path"]

    return consume_listing(keys(), ctx)
