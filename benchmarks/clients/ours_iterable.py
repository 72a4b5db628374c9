"""torchdata_s3.S3IterableDataset.from_prefix in a DataLoader with 2 workers (issue 20): a variant of ours,
reported beside the headline ``torchdata_s3`` (load_files_by_s3) figure."""

from __future__ import annotations

import torchdata_s3

from .common import Context, Measurement
from .dataset_loaders import WORKERS, iterable_loader, measured, prefix_url, transform_for

NAME = "torchdata_s3-iterable"
CONFIGURATION = (
    f"S3IterableDataset.from_prefix(prefix, transform=..., endpoint_url=, region=) defaults (prefetch 128 "
    f"within 512 MiB), listed before the clock; DataLoader(batch_size=None, num_workers={WORKERS}), the "
    "dataset sharding itself over the workers; small: transform stream.read(); images: transform decode"
)


def dataset(ctx: Context, workload: str) -> torchdata_s3.S3IterableDataset:
    """Built (and the prefix listed) before the clock; each worker makes its own native client."""
    return torchdata_s3.S3IterableDataset.from_prefix(
        prefix_url(ctx),
        transform=transform_for(workload, ctx),
        endpoint_url=ctx.endpoint_url,
        region=ctx.region,
        **ctx.options,
    )


make_loader = iterable_loader


_measure = measured(dataset, iterable_loader, batched=False)


def small(ctx: Context) -> Measurement:
    return _measure(ctx, "small")


def images(ctx: Context) -> Measurement:
    return _measure(ctx, "images")
