"""Taking part in torch's DataPipe sharding protocol (DataLoader workers, torch.distributed ranks).

Ranks need no policy of our own: torch's DataLoader (checked against torch 2.13) already shards an
IterDataPipe across ranks. With ``torch.distributed`` initialized it reads ``world_size`` and ``rank``; each
worker ``w`` then calls ``apply_sharding(world_size * num_workers, w * world_size + rank)`` in the DEFAULT
group (``num_workers=0``: ``apply_sharding(world_size, rank)`` in the main process), and it shares one shuffle
seed across ranks and workers. Whatever is the pipeline's single sharding point -- a ``sharding_filter()`` or
our loader -- thus keeps a share disjoint from every other (rank, worker). torchdata's DataLoader2 (its
DistributedReadingService) applies DISTRIBUTED and MULTIPROCESSING groups instead; ShardSpec combines them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from torch.utils.data.datapipes.datapipe import IterDataPipe, MapDataPipe
from torch.utils.data.datapipes.iter import IterableWrapper
from torch.utils.data.datapipes.iter.sharding import SHARDING_PRIORITIES
from torch.utils.data.graph import traverse_dps
from torch.utils.data.graph_settings import _is_sharding_datapipe


class ShardSpec:
    """Which share of a stream this instance takes: item i belongs to it iff i % count == index.

    torch applies sharding per group (DISTRIBUTED ranks, MULTIPROCESSING workers) or once in the DEFAULT
    group with the combined numbers (what DataLoader does). Groups combine like digits of a mixed-radix
    number, higher priority values being the less significant digits, as torch's own sharding_filter does.
    """

    def __init__(self) -> None:
        self.groups: dict[SHARDING_PRIORITIES, tuple[int, int]] = {}
        self.count = 1
        self.index = 0

    def apply(self, count: int, index: int, group: SHARDING_PRIORITIES) -> None:
        if not 0 <= index < count:
            raise ValueError(f"shard index {index} is outside 0..{count - 1}")
        default = SHARDING_PRIORITIES.DEFAULT
        if (group == default and any(g != default for g in self.groups)) or (
            group != default and default in self.groups
        ):
            raise RuntimeError(
                "sharding cannot mix the DEFAULT group with DISTRIBUTED/MULTIPROCESSING groups"
            )
        self.groups[group] = (count, index)
        self.count, self.index = 1, 0
        for priority in sorted(self.groups):
            group_count, group_index = self.groups[priority]
            self.index = self.index * group_count + group_index
            self.count *= group_count

    def owns(self, position: int) -> bool:
        return position % self.count == self.index


def as_datapipe(source: Iterable) -> IterDataPipe:
    """`source` itself if it is a DataPipe, else an IterableWrapper over it (a plain list of URLs, which the
    original DataPipes accepted too)."""
    if isinstance(source, (IterDataPipe, MapDataPipe)):
        return source  # type: ignore[return-value]
    return IterableWrapper(source, deepcopy=False)


def has_sharding_upstream(datapipe: IterDataPipe) -> bool:
    """True if `datapipe` or anything feeding it already shards (e.g. a ``sharding_filter()``). A plain
    iterable (a list of URLs) does not."""
    if not isinstance(datapipe, (IterDataPipe, MapDataPipe)):
        return False
    seen: set[int] = set()

    def visit(graph: dict) -> bool:
        for node_id, (node, children) in graph.items():
            if node_id in seen:
                continue
            seen.add(node_id)
            if _is_sharding_datapipe(node) or visit(children):
                return True
        return False

    return visit(traverse_dps(datapipe))


# DataPipes keep the one that feeds them under one of these names (torch's and torchdata's own, and ours).
_SOURCE_ATTRIBUTES = ("source_datapipe", "datapipe")


def sources_upstream(datapipe: object, limit: int = 32) -> Iterator[object]:
    """The DataPipes feeding `datapipe` one after the other, nearest first, along the single source each
    keeps (a zip or a mux ends the walk). Attribute reads only: unlike traverse_dps, it never pickles a
    wrapped list of URLs."""
    for _ in range(limit):
        datapipe = next(
            (getattr(datapipe, name) for name in _SOURCE_ATTRIBUTES if hasattr(datapipe, name)), None
        )
        if not isinstance(datapipe, (IterDataPipe, MapDataPipe)):
            return
        yield datapipe
