"""The local cache's writes, off the reader's path: ``WRITE_THREADS`` threads per cache run the entries' file
operations (create, write, checksum, footer, rename, abandon), each entry's on one thread in the order they
were asked for, so a reader hands its bytes over and goes on. It waits only when more than
``MAX_PENDING_BYTES`` are still to be written (a disk slower than the network): the memory they take stays
bounded.

Measured on the 2-core development machine: the first writes of a process into fresh page cache ran at
~200 MB/s, a fifth of the speed of later ones, which made the first epoch with the cache half as fast as
without it when the writes were on the reader's path.
"""

from __future__ import annotations

import collections
import itertools
import threading
from typing import Callable, Optional

__all__ = ["BackgroundWrites", "WriteThreads"]

MAX_PENDING_BYTES = 64 * 1024 * 1024
# Each entry needs a new file, and creating one cost about 1 ms of kernel CPU on the development machine's
# disk, even with the machine otherwise idle: a first epoch of 2,000 small objects on the s3like profile
# waited for one thread creating them one at a time (2 s against 1.1 s of network). Two threads create two at
# once (in different folders: one folder takes one creation at a time) while the reader waits for the network.
WRITE_THREADS = 2


class WriteThreads:
    """``threads`` queues of :class:`BackgroundWrites`, sharing ``max_pending_bytes``; each entry's
    operations go to one of them (:meth:`queue`, in turn)."""

    def __init__(self, threads: int = WRITE_THREADS, max_pending_bytes: int = MAX_PENDING_BYTES) -> None:
        self._queues = [BackgroundWrites(max_pending_bytes // threads) for _ in range(threads)]
        self._turn = itertools.cycle(self._queues)

    def queue(self) -> BackgroundWrites:
        """The queue for the next entry's operations."""
        return next(self._turn)

    def drain(self) -> None:
        """Waits until every operation queued so far, on every queue, has run."""
        for queue in self._queues:
            queue.drain()


class BackgroundWrites:
    """An ordered queue of file operations and the daemon thread that runs them (started on first use)."""

    def __init__(self, max_pending_bytes: int = MAX_PENDING_BYTES) -> None:
        self._max_pending = max_pending_bytes
        self._work: collections.deque[tuple[Callable[[], None], int]] = collections.deque()
        self._pending_bytes = 0
        self._busy = False
        self._changed = threading.Condition()
        self._thread: Optional[threading.Thread] = None

    def submit(self, operation: Callable[[], None], data_bytes: int = 0) -> None:
        """Queues ``operation`` (which handles its own errors); waits first while the bytes already queued
        and ``data_bytes`` would exceed the budget."""
        with self._changed:
            while self._pending_bytes and self._pending_bytes + data_bytes > self._max_pending:
                self._changed.wait()
            self._work.append((operation, data_bytes))
            self._pending_bytes += data_bytes
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="torchdata-s3-cache-writes", daemon=True
                )
                self._thread.start()
            self._changed.notify_all()

    def drain(self) -> None:
        """Waits until every operation queued so far has run."""
        with self._changed:
            while self._work or self._busy:
                self._changed.wait()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._work:
                    self._changed.wait()
                operation, data_bytes = self._work.popleft()
                self._busy = True
            try:
                operation()
            finally:
                with self._changed:
                    self._pending_bytes -= data_bytes
                    self._busy = False
                    self._changed.notify_all()
