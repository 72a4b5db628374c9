"""s3torchconnector.S3MapDataset.from_prefix, shuffled by a DataLoader with 2 workers: the peer of
``torchdata_s3-map`` (issue 20), the same loader around it (S3MapDataset has no ``__getitems__``: each
worker fetches its batch's objects one ``__getitem__`` at a time)."""

from __future__ import annotations

from s3torchconnector import S3ClientConfig, S3MapDataset

from .common import Context, Measurement
from .dataset_loaders import (
    MAP_BATCH_SIZE,
    WORKERS,
    map_loader,
    measured,
    prefix_url,
    transform_for,
)

NAME = "s3torchconnector-map"
CONFIGURATION = (
    "S3MapDataset.from_prefix(prefix, region=, endpoint=, transform=..., "
    "s3client_config=S3ClientConfig(force_path_style=True)), default (sequential) reader, listed before the "
    f"clock (len()); DataLoader(shuffle=True, batch_size={MAP_BATCH_SIZE}, num_workers={WORKERS}, collate_fn "
    "keeping the list); small: transform reader.read(); images: transform decode"
)


def dataset(ctx: Context, workload: str) -> S3MapDataset:
    objects = S3MapDataset.from_prefix(
        prefix_url(ctx),
        region=ctx.region,
        endpoint=ctx.endpoint_url,
        transform=transform_for(workload, ctx),
        s3client_config=S3ClientConfig(force_path_style=True),
    )
    # It lists on first use: here, before the clock, as ours lists when built (forked workers inherit it).
    len(objects)
    return objects


_measure = measured(dataset, map_loader, batched=True)


def small(ctx: Context) -> Measurement:
    return _measure(ctx, "small")


def images(ctx: Context) -> Measurement:
    return _measure(ctx, "images")
