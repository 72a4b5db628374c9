"""boto3 get_object, body read in 1 MiB chunks; paginator for listing."""

from __future__ import annotations

import os

import boto3
from botocore.config import Config

from .common import (
    Context,
    Measurement,
    consume_keys,
    consume_listing,
    consume_objects,
    consume_whole_objects,
    gil_pace,
)
from .images import Sample, consume_images, decode

NAME = "boto3"
CONFIGURATION = (
    "boto3 client, get_object + StreamingBody.read(1 MiB) (whole: .read()), max_pool_connections=10; "
    "list_objects_v2 paginator; images: a map-style Dataset, get_object + Body.read() + decode"
)


def client(ctx: Context):  # type: ignore[no-untyped-def]
    return boto3.client(
        "s3", endpoint_url=ctx.endpoint_url, region_name=ctx.region, config=Config(max_pool_connections=10)
    )


def _bodies(ctx: Context):  # type: ignore[no-untyped-def]
    # The client is made here, before the timed loop, as every adapter makes its own. (Made inside the
    # generator it was timed: 0.1-0.15 s of loading boto3's models, a quarter of a 1 GiB read on `fast`.)
    s3 = client(ctx)
    return ((key, s3.get_object(Bucket=ctx.bucket, Key=key)["Body"]) for key in ctx.keys)


def _read_objects(ctx: Context) -> Measurement:
    return consume_objects(_bodies(ctx), ctx)


large = _read_objects
small = _read_objects


def whole(ctx: Context) -> Measurement:
    return consume_whole_objects(_bodies(ctx), ctx)


def listing(ctx: Context) -> Measurement:
    s3 = client(ctx)

    def keys():  # type: ignore[no-untyped-def]
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=ctx.bucket, Prefix=ctx.prefix):
            for entry in page.get("Contents", []):
                yield entry["Key"]

    return consume_keys(keys(), ctx)


def listing_scale(ctx: Context) -> Measurement:
    s3 = client(ctx)

    def keys():  # type: ignore[no-untyped-def]
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=ctx.bucket, Prefix=ctx.prefix):
            for entry in page.get("Contents", []):
                yield entry["Key"]

    return consume_listing(keys(), ctx)


# One 1 GiB object read the same way (the memory workload), and the large objects beside a Python thread.
stream = large
gil = gil_pace(large)


class ImageDataset:
    """The usual boto3 map-style dataset: a key per index, one client per worker process (boto3 clients do
    not survive fork), the body read whole and decoded. (Not a torch ``Dataset`` subclass: the DataLoader
    needs only ``__len__`` and ``__getitem__``, and importing torch here would slow every boto3 run's start.)
    """

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._client = None
        self._client_pid = -1

    def __len__(self) -> int:
        return len(self.ctx.keys)

    def __getitem__(self, index: int) -> Sample:
        if self._client_pid != os.getpid():
            self._client, self._client_pid = client(self.ctx), os.getpid()
        body = self._client.get_object(Bucket=self.ctx.bucket, Key=self.ctx.keys[index])["Body"].read()
        return decode(body, self.ctx.verify)


def images(ctx: Context) -> Measurement:
    from torch.utils.data import DataLoader

    dataset = ImageDataset(ctx)
    return consume_images(lambda: DataLoader(dataset, batch_size=None, num_workers=ctx.num_workers), ctx)
