"""The node memory budget's mechanism (csrc/node_budget.h), across threads and real processes: what is
granted, what is guaranteed above the limit, and that a killed process's bytes come back."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from torchdata_s3 import _core

# Dead processes are looked for at most this often by a process short of bytes (kReclaimIntervalNs).
RECLAIM_INTERVAL_S = 0.1


@pytest.fixture
def budget_file(tmp_path: Path) -> str:
    return str(tmp_path / "node.budget")


def test_takes_are_granted_within_the_limit_and_guaranteed_bytes_above_it(budget_file: str) -> None:
    budget = _core.NodeBudget(budget_file, 100)
    assert budget.take(60) == 60
    assert budget.take(60) == 40  # what is free
    assert budget.take(10) == 0
    assert budget.take(10, guaranteed=10) == 10  # granted anyway: the caller must make progress
    assert (budget.in_use, budget.held_here, budget.peak) == (110, 110, 110)
    assert not budget.take_all_or_nothing(1)
    before = budget.generation
    budget.give(80)
    assert budget.generation != before  # takers refused earlier learn that bytes came back
    assert budget.in_use == 30
    assert budget.take_all_or_nothing(70)
    assert not budget.take_all_or_nothing(1)
    budget.give(100)
    assert budget.in_use == 0
    budget.reset_peak()
    assert budget.peak == 0


def test_takes_that_are_not_guaranteed_leave_each_process_its_reserve(budget_file: str) -> None:
    budget = _core.NodeBudget(budget_file, 100, reserve_bytes=20)
    assert budget.available == 100  # no process is attached before its first take
    assert budget.take(100) == 80  # attached by this take: its reserve is kept free
    assert budget.available == 0
    assert budget.take(20, guaranteed=20) == 20  # the reserve is what a guaranteed take finds free
    assert budget.in_use == 100
    budget.give(100)


def test_processes_share_one_budget_and_a_killed_ones_bytes_come_back(budget_file: str) -> None:
    budget = _core.NodeBudget(budget_file, 100)
    ready_read, ready_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            child = _core.NodeBudget(budget_file, 100)
            os.write(ready_write, str(child.take(70)).encode())
            time.sleep(60)
        finally:
            os._exit(0)
    try:
        assert os.read(ready_read, 16) == b"70"
        assert budget.in_use == 70
        assert budget.take(50) == 30  # the child's 70 count here
        budget.give(30)
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(ready_read)
        os.close(ready_write)
    # The child never gave its bytes back; its slot's lock went with it, so the next short taker reclaims it.
    time.sleep(RECLAIM_INTERVAL_S * 1.5)
    assert budget.take(100) == 100
    assert budget.reclaimed == 70
    budget.give(100)


def test_a_fork_child_holds_none_of_its_parents_bytes(budget_file: str) -> None:
    budget = _core.NodeBudget(budget_file, 100)
    assert budget.take(40) == 40
    result_read, result_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            # The inherited handle: the child attaches a slot of its own at its first call.
            held_at_start = budget.held_here
            budget.give(40)  # not the child's to give: nothing changes
            taken = budget.take(100)
            os.write(result_write, f"{held_at_start} {taken} {budget.held_here}".encode())
        finally:
            os._exit(0)
    try:
        assert os.read(result_read, 64) == b"0 60 60"
    finally:
        os.waitpid(pid, 0)
        os.close(result_read)
        os.close(result_write)
    assert budget.held_here == 40  # the parent's bytes were never touched by the child


def test_threads_taking_and_giving_never_exceed_the_limit(budget_file: str) -> None:
    limit = 1000
    budget = _core.NodeBudget(budget_file, limit)
    over: list[int] = []

    def churn(seed: int) -> None:
        for step in range(2000):
            got = budget.take(7 + (seed + step) % 50)
            if budget.in_use > limit:
                over.append(budget.in_use)
            budget.give(got)

    threads = [threading.Thread(target=churn, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not over
    assert budget.in_use == 0
    assert budget.peak <= limit


def test_a_file_that_is_not_a_budget_is_refused_with_its_path(budget_file: str) -> None:
    Path(budget_file).write_bytes(b"not a budget")
    with pytest.raises(RuntimeError, match=f"node memory budget {budget_file}: is not a budget file"):
        _core.NodeBudget(budget_file, 100)
