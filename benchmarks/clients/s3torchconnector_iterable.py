"""s3torchconnector.S3IterableDataset.from_prefix in a DataLoader with 2 workers: the peer of
``torchdata_s3-iterable`` (issue 20), the same loop around it."""

from __future__ import annotations

from s3torchconnector import S3ClientConfig, S3IterableDataset

from .common import Context, Measurement
from .dataset_loaders import WORKERS, iterable_loader, measured, prefix_url, transform_for

NAME = "s3torchconnector-iterable"
CONFIGURATION = (
    "S3IterableDataset.from_prefix(prefix, region=, endpoint=, transform=..., enable_sharding=True, "
    "s3client_config=S3ClientConfig(force_path_style=True)), default (sequential) reader; "
    f"DataLoader(batch_size=None, num_workers={WORKERS}); each worker lists the prefix when it starts "
    "iterating (the dataset's design: in the clock); small: transform reader.read(); images: transform decode"
)


def dataset(ctx: Context, workload: str) -> S3IterableDataset:
    return S3IterableDataset.from_prefix(
        prefix_url(ctx),
        region=ctx.region,
        endpoint=ctx.endpoint_url,
        transform=transform_for(workload, ctx),
        s3client_config=S3ClientConfig(force_path_style=True),
        enable_sharding=True,  # else every worker reads every object
    )


_measure = measured(dataset, iterable_loader, batched=False)


def small(ctx: Context) -> Measurement:
    return _measure(ctx, "small")


def images(ctx: Context) -> Measurement:
    return _measure(ctx, "images")
