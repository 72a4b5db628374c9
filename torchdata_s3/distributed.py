"""torch.distributed as the loading doors see it: this process's rank, and a result computed on one rank
for all (a listing, so that every rank deals out the very same list)."""

from __future__ import annotations

import pickle
from typing import Any, Callable, Optional, TypeVar

import torch.distributed as dist
from torch.utils.data import get_worker_info

__all__ = ["computed_on_one_rank", "rank_and_world_size"]

Result = TypeVar("Result")


def rank_and_world_size() -> Optional[tuple[int, int]]:
    """(rank, world size) of the default process group, or None when torch.distributed is not initialized
    in this process (a spawned DataLoader worker never is; a forked one inherits its parent's)."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return None


def computed_on_one_rank(
    compute: Callable[[], Result],
    *,
    what: str,
    in_worker_hint: str = "",
    source_rank: int = 0,
    group: Optional[dist.ProcessGroup] = None,
) -> Result:
    """``compute()`` run by ``source_rank`` alone and broadcast to every rank of ``group``; without an
    initialized process group (or with one rank), run here.

    A collective call: every rank of ``group`` must make it. A failure on ``source_rank`` is raised on every
    rank instead of leaving the others waiting. ``what`` names the call in errors (e.g. "list_files_once");
    ``in_worker_hint`` ends the message of a call from a DataLoader worker.

    Raises:
        RuntimeError: called in a DataLoader worker while torch.distributed is initialized (a collective from
            there would wait forever).
    """
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size(group) == 1:
        return compute()
    if get_worker_info() is not None:
        # A forked worker inherits the process group; a collective from there would wait forever.
        raise RuntimeError(
            f"{what} is a collective for the main process of each rank; call it before creating the "
            f"DataLoader and pass the result in{in_worker_hint}"
        )
    # One slot carries either the result or the failure, so that no rank waits for a result that never comes.
    slot: list[Any] = [None]
    if dist.get_rank() == source_rank:
        try:
            slot[0] = compute()
        except Exception as error:
            slot[0] = _transferable(error, source_rank, what)
            dist.broadcast_object_list(slot, src=source_rank, group=group)
            raise
    dist.broadcast_object_list(slot, src=source_rank, group=group)
    received = slot[0]
    if isinstance(received, BaseException):
        raise received
    return received


def _transferable(error: Exception, source_rank: int, what: str) -> Exception:
    """`error` if it survives pickling (S3 errors do), else a RuntimeError that describes it."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        return RuntimeError(f"{what} on rank {source_rank} failed: {error!r}")
    return error
