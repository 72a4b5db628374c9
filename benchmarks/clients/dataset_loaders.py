"""What the dataset clients share (issue 20): ours' ``S3IterableDataset``, ``S3MapDataset`` and
``nodes.S3Source``, and s3torchconnector's datasets, each in the loop a training script writes around it.

The `small` and `images` workloads through a dataset: each item is ``transform(stream)``, computed where the
dataset is read (a DataLoader worker, or a ``ParallelMapper`` thread). For `small` the transform is
``stream.read()`` (the object's bytes, which the DataLoader then moves to the main process, as a user's
loader does); for `images` it is the decode (``images.decode``), as the other images clients do. The clock
covers building the loader's iterator, worker start and shutdown, and every item; the dataset (for ours, the
listing) and the client are built before it, as every adapter builds its client first.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from typing import Any, Callable

from torch.utils.data import DataLoader

from .common import Context, Measurement, consume_bytes_objects
from .images import consume_images, decode

# The DataLoader with workers, on this 2-core machine (the images workload's; `small` uses it too).
WORKERS = 2
# The map-style clients' batch: a batch sampler, so that a dataset with ``__getitems__`` gets a batch's
# indices at once. A common training batch; not tuned.
MAP_BATCH_SIZE = 32


def read_all(stream: Any) -> bytes:
    """The `small` workload's transform: the object's bytes (``read()`` to its end, one call)."""
    return stream.read()


def keep_list(batch: list[Any]) -> list[Any]:
    """A map-style DataLoader's collate_fn: the batch's items as they are (bytes, or decoded samples).
    Module level, so that spawned workers can unpickle it."""
    return batch


def transform_for(workload: str, ctx: Context) -> Callable[[Any], Any]:
    """The item each object becomes: its bytes (`small`) or its decoded image (`images`); picklable."""
    if workload == "small":
        return read_all
    if workload == "images":
        return functools.partial(decode, verify=ctx.verify)
    raise ValueError(f"no dataset transform for the {workload} workload")


def _items(make_loader: Callable[[], Iterable[Any]], batched: bool) -> Iterator[Any]:
    """The loader's items, its batches unpacked; the loader is made at the first ``next()`` (in the clock)."""
    for item in make_loader():
        if batched:
            yield from item
        else:
            yield item


def consume(
    workload: str, make_loader: Callable[[], Iterable[Any]], ctx: Context, *, batched: bool
) -> Measurement:
    """Times one pass of the loader: every object's bytes (`small`) or every decoded image (`images`)."""
    if workload == "small":
        return consume_bytes_objects(_items(make_loader, batched), ctx)
    if workload == "images":
        return consume_images(lambda: _items(make_loader, batched), ctx)
    raise ValueError(f"no dataset consumer for the {workload} workload")


def iterable_loader(objects: Any) -> DataLoader:
    """The DataLoader every iterable row uses (ours, s3torchconnector's, load_files_by_s3, the ceiling)."""
    return DataLoader(objects, batch_size=None, num_workers=WORKERS)


def map_loader(objects: Any) -> DataLoader:
    """The DataLoader every map-style row uses: shuffled batches, so ``__getitems__`` gets a batch."""
    return DataLoader(
        objects, batch_size=MAP_BATCH_SIZE, shuffle=True, num_workers=WORKERS, collate_fn=keep_list
    )


def measured(
    build: Callable[[Context, str], Any], make_loader: Callable[[Any], Iterable[Any]], *, batched: bool
) -> Callable[[Context, str], Measurement]:
    """A client's measurement of one workload: the dataset built before the clock, then one timed pass."""

    def measure(ctx: Context, workload: str) -> Measurement:
        objects = build(ctx, workload)
        return consume(workload, lambda: make_loader(objects), ctx, batched=batched)

    return measure


def prefix_url(ctx: Context) -> str:
    """The dataset's prefix, the URL ``from_prefix`` lists (it holds exactly the case's keys)."""
    return f"s3://{ctx.bucket}/{ctx.prefix}"
