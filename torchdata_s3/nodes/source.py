"""S3Source: the objects under prefixes as a ``torchdata.nodes`` source, resumable mid-epoch."""

from __future__ import annotations

from collections.abc import Generator, Iterable
from typing import Any, Optional, Union

from torchdata.nodes import BaseNode

from ..datasets.epochs import EpochProgress, check_seed, progress_from_state, state_of
from ..datasets.objects import DatasetObjects, Transform
from ..distributed import rank_and_world_size

__all__ = ["S3Source"]


class S3Source(BaseNode):
    r"""Yields ``transform(stream)`` for each S3 object under the prefixes, as :class:`S3IterableDataset`.

    Arguments are those of :meth:`torchdata_s3.S3IterableDataset.from_prefix` (:meth:`from_objects` for
    given URLs); the objects are listed once, when the node is built, and fetched with the same prefetch,
    cache and typed errors. With torch.distributed initialized, each rank reads a disjoint share
    (round-robin over the epoch's order); ``ParallelMapper`` workers parallelise the transform after it, and
    do not shard.

    Epochs and state follow torchdata's contract: the first ``reset(None)`` starts epoch 0, each later one
    the next epoch (a new order with ``shuffle=True``); ``get_state()`` taken mid-epoch and passed to
    ``reset()`` resumes the rest of that epoch, and the following ``reset(None)`` the epoch after it, exactly
    as the uninterrupted run would. A state taken at the end of an epoch resumes to an empty remainder.
    States of every rank can be merged with :meth:`S3IterableDataset.merge_states` to resume with another
    number of ranks.
    """

    def __init__(
        self,
        url_or_urls: Union[str, Iterable[str]],
        *,
        shuffle: bool = False,
        seed: int = 0,
        transform: Optional[Transform] = None,
        skip_missing: bool = False,
        _from_prefix: bool = True,
        **options: Any,
    ) -> None:
        super().__init__()
        check_seed(seed)
        self._objects = DatasetObjects(
            url_or_urls, from_prefix=_from_prefix, transform=transform, skip_missing=skip_missing, **options
        )
        self.shuffle = bool(shuffle)
        self.seed = seed
        self._objects.warn_if_empty(type(self).__name__)
        self._identity = self._objects.identity(shuffle=self.shuffle, seed=seed)
        self._ranks = rank_and_world_size() or (0, 1)
        self._progress: Optional[EpochProgress] = None
        self._items: Optional[Generator[Any, None, None]] = None

    @classmethod
    def from_objects(cls, urls: Union[str, Iterable[str]], **arguments: Any) -> S3Source:
        """The given ``s3://bucket/key`` objects in the given order; arguments as for the constructor."""
        return cls(urls, _from_prefix=False, **arguments)

    @property
    def urls(self) -> list[str]:
        """The objects' URLs in key order (the order before shuffling)."""
        return self._objects.urls

    def reset(self, initial_state: Optional[dict[str, Any]] = None) -> None:
        super().reset(initial_state)
        if self._items is not None:
            self._items.close()  # cancels what the last epoch had requested ahead
        world, rank = (rank_and_world_size() or self._ranks)[::-1]
        if initial_state is not None:
            progress = progress_from_state(initial_state, self._identity, type(self).__name__)
            progress = progress.taken_by(world, rank)
        else:
            epoch = 0 if self._progress is None else self._progress.epoch + 1
            progress = EpochProgress(epoch, shards=world, shard=rank)
        self._progress = progress
        share = progress.share(len(self._objects), shuffle=self.shuffle, seed=self.seed)

        def passed() -> None:
            progress.consumed += 1

        self._items = self._objects.read(share, passed)

    def next(self) -> Any:
        assert self._items is not None  # BaseNode resets before the first next()
        return next(self._items)

    def get_state(self) -> dict[str, Any]:
        assert self._progress is not None
        return state_of(self._identity, self._progress)
