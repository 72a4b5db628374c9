"""The cache's writer locks, in both kinds: OFD byte locks (Linux) and the lock files used where the OS has
no OFD locks. The second kind is forced here by hiding F_OFD_SETLK, in this process and in the holder
processes, so that it is tested on Linux too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from torchdata_s3.cache import locks as cache_locks
from torchdata_s3.cache.locks import WriterLocks

NAME = "0123456789abcdef0123456789abcdef"  # an entry's name: 32 hex digits
OTHER = "fedcba9876543210fedcba9876543210"

# A holder process: loads cache_locks.py alone (no torch, no native module), takes NAME's lock, says whether
# it got it, and holds it until its stdin closes or it is killed.
HOLDER = r"""
import importlib.util, sys
path, root, name, kind = sys.argv[1:5]
spec = importlib.util.spec_from_file_location("cache_locks", path)
cache_locks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cache_locks)
if kind == "lock_files":
    cache_locks._OFD_SETLK = None
lock = cache_locks.WriterLocks(root).try_acquire(name)
print("held" if lock is not None else "busy", flush=True)
sys.stdin.read()
"""


@pytest.fixture(params=["ofd", "lock_files"])
def kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "lock_files":
        monkeypatch.setattr(cache_locks, "_OFD_SETLK", None)
    elif sys.platform.startswith("linux"):
        assert cache_locks._OFD_SETLK is not None, "Linux has F_OFD_SETLK: the OFD kind must be the one used"
    return str(request.param)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "locks").mkdir()  # as CacheStore makes it
    return tmp_path


class Holder:
    """Another process holding (or failing to take) NAME's lock."""

    def __init__(self, root: Path, kind: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", HOLDER, cache_locks.__file__, str(root), NAME, kind],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.answer = self.process.stdout.readline().strip()

    def let_go(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        assert self.process.wait(timeout=30) == 0
        self.close_pipes()

    def die(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)
        self.close_pipes()

    def close_pipes(self) -> None:
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None and not pipe.closed:
                pipe.close()


@pytest.fixture
def start_holder(root: Path, kind: str) -> Iterator[Callable[[], Holder]]:
    started: list[Holder] = []

    def start() -> Holder:
        started.append(Holder(root, kind))
        return started[-1]

    yield start
    for holder in started:
        if holder.process.poll() is None:
            holder.die()
        holder.close_pipes()


def test_a_lock_excludes_this_process_and_is_taken_again_after_release(root: Path, kind: str) -> None:
    first, second = WriterLocks(str(root)), WriterLocks(str(root))
    lock = first.try_acquire(NAME)
    assert lock is not None
    assert first.try_acquire(NAME) is None  # another stream of this process
    assert second.try_acquire(NAME) is None  # another open of the directory
    other = second.try_acquire(OTHER)
    assert other is not None
    lock.release()
    lock.release()  # idempotent
    again = second.try_acquire(NAME)
    assert again is not None
    again.release()
    other.release()
    assert first.try_acquire(NAME) is not None


def test_a_lock_held_by_another_process_excludes_until_it_lets_go(
    root: Path, start_holder: Callable[[], Holder]
) -> None:
    holder = start_holder()
    assert holder.answer == "held"
    locks = WriterLocks(str(root))
    assert locks.try_acquire(NAME) is None
    assert start_holder().answer == "busy"  # a third process too
    holder.let_go()
    lock = locks.try_acquire(NAME)
    assert lock is not None
    lock.release()


def test_a_killed_holder_leaves_the_lock_free(root: Path, start_holder: Callable[[], Holder]) -> None:
    holder = start_holder()
    assert holder.answer == "held"
    locks = WriterLocks(str(root))
    assert locks.try_acquire(NAME) is None
    holder.die()
    lock = locks.try_acquire(NAME)
    assert lock is not None
    lock.release()


def test_the_two_kinds_use_their_own_files(root: Path, kind: str) -> None:
    lock = WriterLocks(str(root)).try_acquire(NAME)
    assert lock is not None
    lock_files = os.listdir(root / "locks")
    assert lock_files == ([NAME + ".lock"] if kind == "lock_files" else [])
    assert (root / "writers.lock").exists() == (kind == "ofd")
    lock.release()
