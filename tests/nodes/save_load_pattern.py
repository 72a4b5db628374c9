"""torchdata's node save/load test pattern (its test suite's ``run_test_save_load_state``, which is not
shipped in torchdata's wheel, so it cannot be imported), written again from its documented steps: a state
taken before iterating, mid-epoch 0, at the end of epoch 0 and mid-epoch 1 must each resume exactly what
the uninterrupted run yielded from there, and the epoch after it."""

from __future__ import annotations

from typing import Any

from torchdata.nodes import BaseNode, Loader


def take(iterator: Any, count: int) -> list:
    return [next(iterator) for _ in range(count)]


def check_save_load_state(node: BaseNode, midpoint: int) -> None:
    loader = Loader(node)
    initial_state = loader.state_dict()
    iterator = iter(loader)
    epoch0 = take(iterator, midpoint)
    mid_epoch0_state = loader.state_dict()
    epoch0 += list(iterator)
    end_epoch0_state = loader.state_dict()

    iterator = iter(loader)
    epoch1 = take(iterator, midpoint)
    mid_epoch1_state = loader.state_dict()
    epoch1 += list(iterator)
    assert epoch0 and epoch1

    # From mid-epoch 0: the rest of epoch 0, then epoch 1.
    loader.load_state_dict(mid_epoch0_state)
    assert list(loader) == epoch0[midpoint:]
    assert list(loader) == epoch1

    # From mid-epoch 1: the rest of epoch 1.
    loader.load_state_dict(mid_epoch1_state)
    assert list(loader) == epoch1[midpoint:]

    # From the start: both epochs again.
    loader.load_state_dict(initial_state)
    assert list(loader) == epoch0
    assert list(loader) == epoch1

    # From the end of epoch 0: nothing without restarting, epoch 1 with it.
    loader = Loader(node, restart_on_stop_iteration=False)
    loader.load_state_dict(end_epoch0_state)
    assert list(loader) == []
    loader = Loader(node)
    loader.load_state_dict(end_epoch0_state)
    assert list(loader) == epoch1
