"""S3IterableDataset: the objects under prefixes (or given URLs), sharded, shuffled per epoch, resumable."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator
from typing import Any, Optional, Union

from torch.utils.data import IterableDataset, get_worker_info

from ..distributed import rank_and_world_size
from .epochs import (
    STATE_FORMAT,
    DatasetStateError,
    EpochProgress,
    check_identity,
    check_seed,
    identity_of,
    merge_progress,
    progress_from_state,
    state_of,
)
from .objects import DatasetObjects, Transform

__all__ = ["S3IterableDataset"]


class S3IterableDataset(IterableDataset):
    r"""Yields ``transform(stream)`` for each S3 object, each DataLoader worker of each rank a disjoint share.

    Build it with :meth:`from_prefix` (every object under one or more prefixes, listed once, on one rank,
    when the dataset is built) or :meth:`from_objects` (the given object URLs, in the given order). ``stream``
    is the seekable stream that ``load_files_by_s3`` yields (an :class:`~torchdata_s3.reader.S3ObjectStream`,
    or a :class:`~torchdata_s3.landed.LandedObjectStream` for an object of at most ``small_object_bytes``;
    with ``url``, ``bucket`` and ``key``), fetched with the same prefetch (``prefetch`` objects ahead within
    ``max_inflight_bytes``), local cache (``cache_dir``) and typed errors.

    Order and sharding: each epoch reads the objects in key order, or with ``shuffle=True`` in a permutation
    drawn from ``(seed, epoch)`` alone, the same on every rank. The order is dealt round-robin to
    ``world_size x num_workers`` readers (torch.distributed ranks x DataLoader workers): no object is read
    twice or skipped in an epoch, also when there are fewer objects than readers.

    Epochs: :meth:`set_epoch` chooses the next epoch, as with ``DistributedSampler``; without it, each new
    iteration of the same object (``persistent_workers=True``, or ``num_workers=0``) starts the next epoch.

    Resume: :meth:`state_dict` / :meth:`load_state_dict` (the ``Stateful`` protocol that
    ``torchdata.stateful_dataloader.StatefulDataLoader`` calls in each worker) save and restore the position
    in the epoch: a resumed run yields exactly the items the uninterrupted run would still have yielded, in
    the same order, and fetches none it had already consumed. A state is a small JSON-safe dict without the
    key list. To resume with another number of ranks or workers, pass the states of every rank to
    :meth:`merge_states` and load the result (docs/datasets.md, "Elastic resume").

    An empty listing gives a warning and empty epochs.
    """

    def __init__(self, objects: DatasetObjects, *, shuffle: bool = False, seed: int = 0) -> None:
        super().__init__()
        check_seed(seed)
        self._objects = objects
        self.shuffle = bool(shuffle)
        self.seed = seed
        self._identity = objects.identity(shuffle=self.shuffle, seed=seed)
        self._ranks = rank_and_world_size() or (0, 1)
        self._epoch = 0  # the epoch the next iteration reads, unless a loaded state says otherwise
        self._epoch_chosen = False  # set_epoch() was called since the last iteration began
        self._iterated = False
        self._pending: Optional[EpochProgress] = None  # a loaded state, for the next iteration
        self._progress: Optional[EpochProgress] = None  # the current (or last) iteration's
        objects.warn_if_empty(type(self).__name__)

    @classmethod
    def from_prefix(
        cls,
        url_or_urls: Union[str, Iterable[str]],
        *,
        shuffle: bool = False,
        seed: int = 0,
        transform: Optional[Transform] = None,
        skip_missing: bool = False,
        **options: Any,
    ) -> S3IterableDataset:
        """Every object under ``s3://bucket/prefix`` (or several prefixes, in the given order), listed now.

        Args:
            url_or_urls: one ``s3://`` prefix or several.
            shuffle: a new permutation of the objects each epoch [False: key order].
            seed: the shuffle's seed; the same on every rank [0].
            transform: applied to each object's stream [None: yield the stream itself].
            skip_missing: skip an object deleted since the listing, with a ``MissingObjectWarning``
                [False: raise its S3FileNotFoundError].
            **options: :class:`~torchdata_s3.S3Config` fields (``endpoint_url``, ``region``, ``cache_dir``,
                ...), ``config=``, and the loader's ``prefetch`` [128] and ``max_inflight_bytes`` [512 MiB].

        Raises:
            InvalidS3UrlError, S3FileNotFoundError (no such bucket), S3PermissionError, S3NetworkError.
        """
        objects = DatasetObjects(
            url_or_urls, from_prefix=True, transform=transform, skip_missing=skip_missing, **options
        )
        return cls(objects, shuffle=shuffle, seed=seed)

    @classmethod
    def from_objects(
        cls,
        urls: Union[str, Iterable[str]],
        *,
        shuffle: bool = False,
        seed: int = 0,
        transform: Optional[Transform] = None,
        skip_missing: bool = False,
        **options: Any,
    ) -> S3IterableDataset:
        """The objects ``s3://bucket/key`` given, in the given order (nothing is listed); arguments as for
        :meth:`from_prefix`.

        Raises:
            InvalidS3UrlError, IsADirectoryError (a URL ending in ``/``).
        """
        objects = DatasetObjects(
            urls, from_prefix=False, transform=transform, skip_missing=skip_missing, **options
        )
        return cls(objects, shuffle=shuffle, seed=seed)

    @property
    def urls(self) -> list[str]:
        """The objects' URLs in key order (the order before shuffling)."""
        return self._objects.urls

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iteration reads (it seeds the shuffle). A loaded state of another epoch is
        dropped; one of this epoch is kept, so ``load_state_dict`` then ``set_epoch`` resumes."""
        if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
            raise ValueError(f"epoch must be an integer >= 0, got {epoch!r}")
        if self._pending is not None and self._pending.epoch != epoch:
            warnings.warn(
                f"set_epoch({epoch}) drops the loaded state of epoch {self._pending.epoch}",
                UserWarning,
                stacklevel=2,
            )
            self._pending = None
        self._epoch = epoch
        self._epoch_chosen = True

    def __getstate__(self) -> dict[str, Any]:
        # A spawned DataLoader worker never has torch.distributed initialized: it learns its rank from the
        # main process, as of when the DataLoader starts it (the dataset may be built before init).
        state = self.__dict__.copy()
        state["_ranks"] = rank_and_world_size() or self._ranks
        return state

    # -- iteration ----------------------------------------------------------------------------------------

    def _layout(self) -> tuple[int, int]:
        """(shards, shard): this reader among all ranks x workers."""
        rank, world = rank_and_world_size() or self._ranks
        info = get_worker_info()
        workers, worker = (info.num_workers, info.id) if info is not None else (1, 0)
        return world * workers, rank * workers + worker

    def _next_progress(self) -> EpochProgress:
        shards, shard = self._layout()
        if self._pending is not None:
            progress = self._pending.taken_by(shards, shard)
            self._pending = None
        else:
            if self._iterated and not self._epoch_chosen:
                self._epoch += 1
            progress = EpochProgress(self._epoch, shards=shards, shard=shard)
        self._epoch = progress.epoch
        self._epoch_chosen = False
        self._iterated = True
        return progress

    def __iter__(self) -> Iterator[Any]:
        progress = self._progress = self._next_progress()
        share = progress.share(len(self._objects), shuffle=self.shuffle, seed=self.seed)

        def passed() -> None:
            progress.consumed += 1

        return self._objects.read(share, passed)

    # -- state --------------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Where this reader is: its epoch, layout and how many of its objects it has passed; JSON-safe.

        Before any iteration (or after :meth:`set_epoch`) it is the start of the next epoch."""
        if self._pending is not None:
            progress = self._pending
        elif self._progress is None or self._epoch_chosen:
            progress = EpochProgress(self._epoch)
        else:
            progress = self._progress
        return state_of(self._identity, progress)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resumes from ``state`` at the next iteration.

        Raises:
            DatasetStateError: the state is from another dataset (other URLs, shuffle, seed or listing: the
                message says which), malformed, or a single shard's state for another layout.
        """
        progress = progress_from_state(state, self._identity, type(self).__name__)
        self._pending = progress
        self._epoch = progress.epoch
        self._epoch_chosen = False

    @classmethod
    def merge_states(cls, states: Iterable[Any]) -> dict[str, Any]:
        """One state for an elastic resume, from the states of every rank (each a dataset state, a
        ``StatefulDataLoader.state_dict()``, or any dict or list holding them).

        Load the result into the dataset of every rank of the new job (before its DataLoader iterates):
        the objects no shard had consumed are dealt out again, in the epoch's order, to the new layout, and
        each is yielded exactly once over the new ranks and workers.

        Raises:
            DatasetStateError: a shard's state is missing or repeated, or the states differ in dataset,
                epoch or layout.
        """
        found = list(_dataset_states(states))
        if not found:
            raise DatasetStateError("no S3IterableDataset state found in what was given to merge_states")
        identity = identity_of(found[0].get("dataset"))
        for state in found[1:]:
            check_identity(state.get("dataset"), identity)
        return state_of(identity, merge_progress(EpochProgress.from_state(state) for state in found))


def _dataset_states(value: Any) -> Iterator[dict[str, Any]]:
    """Every dataset state inside ``value`` (StatefulDataLoader nests them per worker)."""
    if isinstance(value, dict):
        if value.get("format") == STATE_FORMAT:
            yield value
            return
        for item in value.values():
            yield from _dataset_states(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _dataset_states(item)
