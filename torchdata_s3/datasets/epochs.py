"""Which objects a shard reads in an epoch, and how far it got: the resumable part of the datasets.

An epoch's order is a permutation of the listed objects' positions: the listing order, or with ``shuffle``
a permutation drawn from ``(seed, epoch)`` alone, so every rank and worker computes the same one. The order
is dealt round-robin to ``shards`` readers (ranks x DataLoader workers): shard ``j`` reads the positions
``j, j + shards, j + 2 * shards, ...`` of it, in that order.

Progress is the number of its positions a shard has passed (yielded, or skipped as missing). That and the
layout (``shards``, ``shard``) are all a state holds, besides what identifies the dataset: never the key
list. Resuming with the same layout continues each shard where it stopped, so the rest of the epoch comes in
exactly the order the uninterrupted run would have produced.

Elastic resume: the states of every shard of one layout, merged (:func:`merge_progress`), say how far each
got. What they had not consumed is, in the epoch's order, the *remaining* sequence; a new layout deals that
out round-robin again. A later state of that run records the merged layout under ``resumed``, so resuming
again (elastically or not) recomputes the same remaining sequence. The next epoch starts whole.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any, Optional

import torch

__all__ = [
    "STATE_FORMAT",
    "DatasetStateError",
    "EpochProgress",
    "check_identity",
    "check_seed",
    "epoch_order",
    "identity_of",
    "merge_progress",
    "progress_from_state",
    "state_of",
]

# Marks a dict as one of our states (and its version): a StatefulDataLoader's state is searched for it.
STATE_FORMAT = "torchdata_s3.epoch/1"


class DatasetStateError(ValueError):
    """A state that cannot be applied to this dataset: saved from another one (other URLs, seed, shuffle or
    listing), malformed, or an incomplete set of shard states for an elastic resume. The message says what
    differs."""


def check_seed(seed: object) -> None:
    """Refuses a shuffle seed that is not an integer (it must be the same on every rank and run)."""
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"seed must be an integer, got {seed!r}")


def _seed_of(seed: int, epoch: int) -> int:
    digest = hashlib.sha256(f"torchdata_s3:{seed}:{epoch}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def epoch_order(count: int, *, shuffle: bool, seed: int, epoch: int) -> torch.Tensor:
    """The positions of ``count`` objects in the order epoch ``epoch`` reads them (int64)."""
    if not shuffle:
        return torch.arange(count, dtype=torch.int64)
    generator = torch.Generator()
    generator.manual_seed(_seed_of(seed, epoch))
    return torch.randperm(count, generator=generator, dtype=torch.int64)


def _remaining(order: torch.Tensor, shards: int, consumed: Sequence[int]) -> torch.Tensor:
    """The entries of ``order`` not consumed by a layout of ``shards`` round-robin readers, in order."""
    index = torch.arange(order.numel(), dtype=torch.int64)
    passed = torch.as_tensor(list(consumed), dtype=torch.int64)
    return order[(index // shards) >= passed[index % shards]]


def _check_layout(layout: Any) -> tuple[int, list[int]]:
    try:
        shards = layout["shards"]
        consumed = list(layout["consumed"])
    except (TypeError, KeyError) as error:
        raise DatasetStateError(f"malformed resumed layout {layout!r}: {error!r}") from None
    if not isinstance(shards, int) or shards < 1 or len(consumed) != shards:
        raise DatasetStateError(f"malformed resumed layout {layout!r}: one consumed count per shard expected")
    if any(not isinstance(count, int) or count < 0 for count in consumed):
        raise DatasetStateError(f"malformed resumed layout {layout!r}: counts must be integers >= 0")
    return shards, consumed


class EpochProgress:
    """One shard's place in one epoch.

    Attributes:
        epoch: the epoch number (it seeds the shuffle).
        resumed: the layouts this epoch was resumed from (each ``{"shards", "consumed"}``), oldest first.
        shards, shard: this reader's layout; None while the state is merged and not yet taken by a reader.
        consumed: positions of its share this shard has passed.
    """

    def __init__(
        self,
        epoch: int,
        *,
        resumed: Optional[list[dict[str, Any]]] = None,
        shards: Optional[int] = None,
        shard: Optional[int] = None,
        consumed: int = 0,
    ) -> None:
        self.epoch = epoch
        self.resumed = list(resumed or [])
        self.shards = shards
        self.shard = shard
        self.consumed = consumed

    def share(self, count: int, *, shuffle: bool, seed: int) -> list[int]:
        """The positions this shard reads in the rest of its epoch, in order."""
        assert self.shards is not None and self.shard is not None
        order = epoch_order(count, shuffle=shuffle, seed=seed, epoch=self.epoch)
        for layout in self.resumed:
            shards, consumed = _check_layout(layout)
            order = _remaining(order, shards, consumed)
        # A list, not the tensor: iterating a tensor makes a tensor object per element up front (200 ms for
        # 100,000 positions, seen as the first item's latency); tolist() takes 2 ms.
        return order[self.shard :: self.shards][self.consumed :].tolist()

    def taken_by(self, shards: int, shard: int) -> EpochProgress:
        """This progress as a reader of layout (shards, shard) continues it.

        The same layout continues where it stopped. A merged state (no layout yet) becomes a resumed layout,
        and the reader starts at the beginning of its share of what remains. Anything else is refused: a
        shard's own state says nothing about the other shards' progress.
        """
        if self.shards is None:
            return EpochProgress(self.epoch, resumed=self.resumed, shards=shards, shard=shard)
        if (self.shards, self.shard) == (shards, shard):
            return self
        raise DatasetStateError(
            f"this state belongs to shard {self.shard} of {self.shards} (ranks x DataLoader workers), but it "
            f"is being resumed by shard {shard} of {shards}. To resume with another number of ranks or "
            f"workers, merge the states of every shard first: "
            f"S3IterableDataset.merge_states([state of every rank]) (docs/datasets.md, 'Elastic resume')"
        )

    def as_state(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "resumed": [dict(layout) for layout in self.resumed],
            "shards": self.shards,
            "shard": self.shard,
            "consumed": self.consumed,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> EpochProgress:
        try:
            epoch, consumed = state["epoch"], state["consumed"]
            shards, shard, resumed = state["shards"], state["shard"], state["resumed"]
        except (TypeError, KeyError) as error:
            raise DatasetStateError(f"malformed dataset state: missing {error}") from None
        for layout in resumed:
            _check_layout(layout)
        if not isinstance(epoch, int) or epoch < 0 or not isinstance(consumed, int) or consumed < 0:
            raise DatasetStateError(f"malformed dataset state: epoch {epoch!r}, consumed {consumed!r}")
        if (shards is None) != (shard is None) or (
            shards is not None
            and not (isinstance(shards, int) and isinstance(shard, int) and 0 <= shard < shards)
        ):
            raise DatasetStateError(f"malformed dataset state: shard {shard!r} of {shards!r}")
        return cls(epoch, resumed=resumed, shards=shards, shard=shard, consumed=consumed)


def merge_progress(progresses: Iterable[EpochProgress]) -> EpochProgress:
    """One progress, not yet taken by any reader, from the progress of every shard of one layout.

    Raises:
        DatasetStateError: shards missing or repeated, other epochs or layouts among them.
    """
    progresses = list(progresses)
    if not progresses:
        raise DatasetStateError("no dataset state to merge")
    first = progresses[0]
    if first.shards is None:
        if len(progresses) == 1:
            return first  # already merged
        raise DatasetStateError("a merged state cannot be merged with others")
    consumed: dict[int, int] = {}
    for progress in progresses:
        if (progress.epoch, progress.resumed, progress.shards) != (first.epoch, first.resumed, first.shards):
            raise DatasetStateError(
                f"the states come from different points: epoch {progress.epoch} with {progress.shards} "
                f"shards beside epoch {first.epoch} with {first.shards}; merge the states saved at one step"
            )
        assert progress.shard is not None
        if progress.shard in consumed:
            raise DatasetStateError(
                f"shard {progress.shard} of {first.shards} appears twice among the states"
            )
        consumed[progress.shard] = progress.consumed
    missing = sorted(set(range(first.shards)) - set(consumed))
    if missing:
        raise DatasetStateError(
            f"the states of shards {missing} of {first.shards} are missing: pass the state of every rank "
            "(with every DataLoader worker's) to resume elastically"
        )
    layout = {"shards": first.shards, "consumed": [consumed[shard] for shard in range(first.shards)]}
    return EpochProgress(first.epoch, resumed=[*first.resumed, layout])


def identity_of(saved: Any) -> dict[str, Any]:
    """``saved`` (a state's "dataset" entry) as a dataset identity; DatasetStateError if it is none."""
    if not isinstance(saved, dict):
        raise DatasetStateError(f"malformed dataset state: no dataset identity ({saved!r})")
    return saved


def check_identity(saved: Any, current: dict[str, Any]) -> None:
    """Raises DatasetStateError naming every way ``saved`` differs from ``current``."""
    saved = identity_of(saved)
    differences = []
    if saved.get("kind") != current["kind"] or saved.get("inputs_sha256") != current["inputs_sha256"]:
        then = saved.get("inputs") or f"{saved.get('kind')} URLs with digest {saved.get('inputs_sha256')}"
        now = current["inputs"] or f"{current['kind']} URLs with digest {current['inputs_sha256']}"
        differences.append(f"URLs: saved from {then}, now {now}")
    for name in ("shuffle", "seed"):
        if saved.get(name) != current[name]:
            differences.append(f"{name}: saved {saved.get(name)!r}, now {current[name]!r}")
    listing = (saved.get("objects"), saved.get("listing_sha256"))
    if not differences and listing != (current["objects"], current["listing_sha256"]):
        differences.append(
            f"listing: {saved.get('objects')} objects when the state was saved, {current['objects']} "
            "now (objects were added, deleted or renamed since). The saved order cannot be applied to "
            "another listing: build the dataset with from_objects(<the URLs it had>) (dataset.urls) "
            "to resume over the same objects, with skip_missing=True to skip the deleted ones"
        )
    if differences:
        raise DatasetStateError("the state was saved from another dataset: " + "; ".join(differences))


def state_of(identity: dict[str, Any], progress: EpochProgress) -> dict[str, Any]:
    """A saved state: what identifies the dataset, and the progress."""
    return {"format": STATE_FORMAT, "dataset": dict(identity), **progress.as_state()}


def progress_from_state(state: Any, identity: dict[str, Any], kind: str) -> EpochProgress:
    """The progress in ``state``, checked against the dataset identified by ``identity``.

    Raises:
        DatasetStateError: not a state of ours, from another dataset, or malformed.
    """
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise DatasetStateError(
            f"not a state of {kind} (format {STATE_FORMAT!r} expected): {str(state)[:200]}"
        )
    check_identity(state.get("dataset"), identity)
    return EpochProgress.from_state(state)
