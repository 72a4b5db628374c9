"""torchdata_s3.S3MapDataset.from_prefix, shuffled by a DataLoader with 2 workers (issue 20): the batch
sampler hands each worker a batch's indices, which ``__getitems__`` fetches concurrently. A variant of
ours, reported beside the headline ``torchdata_s3`` (load_files_by_s3) figure."""

from __future__ import annotations

import torchdata_s3

from .common import Context, Measurement
from .dataset_loaders import (
    MAP_BATCH_SIZE,
    WORKERS,
    map_loader,
    measured,
    prefix_url,
    transform_for,
)

NAME = "torchdata_s3-map"
CONFIGURATION = (
    "S3MapDataset.from_prefix(prefix, transform=..., endpoint_url=, region=) defaults (a batch's GETs "
    f"concurrent, prefetch 128 within 512 MiB), listed before the clock; DataLoader(shuffle=True, "
    f"batch_size={MAP_BATCH_SIZE}, num_workers={WORKERS}, collate_fn keeping the list); small: transform "
    "stream.read(); images: transform decode"
)


def dataset(ctx: Context, workload: str) -> torchdata_s3.S3MapDataset:
    return torchdata_s3.S3MapDataset.from_prefix(
        prefix_url(ctx),
        transform=transform_for(workload, ctx),
        endpoint_url=ctx.endpoint_url,
        region=ctx.region,
        **ctx.options,
    )


make_loader = map_loader


_measure = measured(dataset, map_loader, batched=True)


def small(ctx: Context) -> Measurement:
    return _measure(ctx, "small")


def images(ctx: Context) -> Measurement:
    return _measure(ctx, "images")
