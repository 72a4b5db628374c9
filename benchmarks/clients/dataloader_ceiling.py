"""The DataLoader's own ceiling on `small` (a reference row, not a peer): the 2-worker DataLoader of
``torchdata_s3-iterable`` (same batch_size, collate, start method) moving in-memory bytes objects of the
dataset's sizes, with no S3, no network and no disk. Each worker takes its share of the objects (every
second one, as the iterable dataset deals them) and builds each item as a new bytes object copied from one
buffer it allocated, as ``read()`` returns a new bytes object; the DataLoader then pickles it through the
worker's queue to the main process. Timed as the dataset clients are (``dataset_loaders.consume``: the
loader's iterator, worker start and shutdown, every item).

What it measures: what the DataLoader transport alone delivers on this machine in the same run, the bound
of every row that ends in this loader. Only for `small`: on `images` the decode, not the transport, is the
work (and a decode of no image measures nothing)."""

from __future__ import annotations

from collections.abc import Iterator

from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from .common import Context, Measurement
from .dataset_loaders import WORKERS, consume, iterable_loader

NAME = "dataloader-ceiling"
CONFIGURATION = (
    f"DataLoader(batch_size=None, num_workers={WORKERS}) over an IterableDataset whose workers yield bytes "
    "objects of the dataset's sizes copied from one in-memory buffer (each worker every second object); no "
    "S3, no disk: the DataLoader transport's ceiling (small only)"
)


class InMemoryObjects(IterableDataset):
    """Yields a bytes object of each size in `sizes`, dealt round-robin over the DataLoader's workers."""

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = list(sizes)

    def __iter__(self) -> Iterator[bytes]:
        info = get_worker_info()
        index, count = (info.id, info.num_workers) if info is not None else (0, 1)
        largest = max(self.sizes, default=0)
        # Allocated in the worker (a spawned one gets no copy from its parent); not zeros, in case anything
        # on the way treats a page of zeros specially.
        buffer = memoryview((bytes(range(256)) * (largest // 256 + 1))[:largest])
        for size in self.sizes[index::count]:
            # A new bytes object, copied, as read() returns (a slice of a bytes object as long as the
            # object itself would be the same object, never copied).
            yield bytes(buffer[:size])


def make_loader(ctx: Context) -> DataLoader:
    return iterable_loader(InMemoryObjects(ctx.sizes))


def small(ctx: Context) -> Measurement:
    if len(ctx.sizes) != len(ctx.keys):
        raise ValueError("the DataLoader ceiling needs the dataset's object sizes (ctx.sizes)")
    return consume("small", lambda: make_loader(ctx), ctx, batched=False)
