"""torchdata 0.9's original C++ S3FileLoader / S3FileLister (aws-sdk-cpp), configured by S3_ENDPOINT_URL."""

from __future__ import annotations

import functools
import os
import warnings

from .common import Context, Measurement, consume_keys, consume_objects, consume_text, gil_pace, strip_bucket
from .images import consume_images, decode


def _import():  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torchdata.datapipes.iter import IterableWrapper, S3FileLister, S3FileLoader
    return IterableWrapper, S3FileLister, S3FileLoader


NAME = "torchdata-original"
CONFIGURATION = "torchdata 0.9 S3FileLoader(sharding_filter(urls)) with its defaults; S3FileLister"


def _environment(ctx: Context) -> None:
    os.environ["S3_ENDPOINT_URL"] = ctx.endpoint_url
    os.environ.setdefault("AWS_REGION", ctx.region)


def _read_objects(ctx: Context) -> Measurement:
    _environment(ctx)
    iterable_wrapper, _lister, loader = _import()
    return consume_objects(loader(iterable_wrapper(ctx.urls()).sharding_filter()), ctx)


large = _read_objects
small = _read_objects


def text(ctx: Context) -> Measurement:
    _environment(ctx)
    iterable_wrapper, _lister, loader = _import()
    from torch.utils.data import DataLoader

    def make_loader() -> DataLoader:
        pipe = loader(iterable_wrapper(ctx.urls()).sharding_filter()).readlines(return_path=False)
        return DataLoader(pipe, batch_size=ctx.batch_size, num_workers=ctx.num_workers)

    return consume_text(make_loader, ctx)


def listing(ctx: Context) -> Measurement:
    _environment(ctx)
    iterable_wrapper, lister, _loader = _import()
    urls = lister(iterable_wrapper([f"s3://{ctx.bucket}/{ctx.prefix}"]))
    return consume_keys((strip_bucket(url, ctx.bucket) for url in urls), ctx)


# One 1 GiB object read the same way (the memory workload), and the large objects beside a Python thread.
stream = large
gil = gil_pace(large)


def _decode_loaded(pair, verify: bool = False):  # type: ignore[no-untyped-def]
    _url, stream = pair  # a StreamWrapper around the whole object in memory: PIL can seek it
    return decode(stream, verify)


def images(ctx: Context) -> Measurement:
    _environment(ctx)
    iterable_wrapper, _lister, loader = _import()
    from torch.utils.data import DataLoader

    def make_loader() -> DataLoader:
        pipe = loader(iterable_wrapper(ctx.urls()).sharding_filter())
        pipe = pipe.map(functools.partial(_decode_loaded, verify=ctx.verify))
        return DataLoader(pipe, batch_size=None, num_workers=ctx.num_workers)

    return consume_images(make_loader, ctx)
