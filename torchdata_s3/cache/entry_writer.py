"""Writing one cache entry: bytes to a temp file on a writes' thread, then the footer and a rename."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Optional

from .entry import BLOCK_BYTES, crc32, entry_footer, entry_name
from .locks import WriterLock
from .writes import BackgroundWrites

if TYPE_CHECKING:
    from .store import CacheStore

__all__ = ["EntryWriter"]

# An entry's writer hands its bytes to the writes' thread in batches of at least this many (or at commit).
_HOLD_BYTES = BLOCK_BYTES


class EntryWriter:
    """Writes one entry to a temp file as bytes arrive in order; :meth:`commit` renames it into place.

    The file operations run on ``writes``' thread, in order; a failure there (disk full, quota, ...) drops
    the entry, is passed to ``on_failure`` from that thread, and is raised by the next :meth:`write`."""

    def __init__(
        self,
        store: CacheStore,
        bucket: str,
        key: str,
        lock: WriterLock,
        on_release: Callable[[], None],
        writes: BackgroundWrites,
        on_failure: Callable[[OSError], None],
    ) -> None:
        self._store = store
        self._on_release = on_release
        self._writes = writes
        self._on_failure = on_failure
        self.error: Optional[OSError] = None
        self.bucket, self.key = bucket, key
        self.name = entry_name(bucket, key)
        self._lock: Optional[WriterLock] = lock
        self.temp_path = store.temp_path(self.name)
        self._fd = -1
        self._finished = False  # committed or abandoned: later operations do nothing
        self.written = 0  # bytes handed to write()
        self._block_crcs: list[int] = []
        self._crc = 0  # of the block being written
        self._in_block = 0  # its bytes so far
        # Bytes not yet handed to the writes' thread (up to _HOLD_BYTES), and whether the temp file's creation
        # was: a small object's entry is then one operation on that thread (create, write, footer, rename),
        # and a stream closed before any hand-over creates no file at all. Creating a file costs more than
        # writing 100 kB on the development machine's disk: that too is done on the writes' thread.
        self._held: list[memoryview] = []
        self._held_bytes = 0
        self._handed_over = False

    def _open_now(self) -> None:
        self._store.make_folder_of(self.name)
        self._fd = os.open(self.temp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        # Marks the temp file as having a live writer, for the clean-up of those killed mid-write.
        fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def write(self, data: memoryview) -> None:
        """Appends bytes (copied first unless read-only: the caller may reuse its buffer). Raises the
        OSError of an earlier write that failed: the caller abandons the entry."""
        if self.error is not None:
            raise self.error
        view = memoryview(data).cast("B")
        if not view.readonly:
            view = memoryview(bytes(view))
        self.written += len(view)
        self._held.append(view)
        self._held_bytes += len(view)
        if self._held_bytes >= _HOLD_BYTES:
            self._hand_over(None)

    def _hand_over(self, etag: Optional[str]) -> None:
        """Queues the held bytes (after the temp file's creation, the first time), then the commit if
        ``etag`` is given, as one operation of the writes' thread."""
        views, held = self._held, self._held_bytes
        self._held, self._held_bytes = [], 0
        create = not self._handed_over
        self._handed_over = True
        self._writes.submit(lambda: self._guarded(self._run_now, create, views, etag), held)

    def _run_now(self, create: bool, views: list[memoryview], etag: Optional[str]) -> None:
        if create:
            self._open_now()
        for view in views:
            self._write_now(view)
        if etag is not None:
            self._commit_now(etag)

    def _guarded(self, operation: Callable[..., None], *arguments: object) -> None:
        """Runs one file operation on the writes' thread; a failure drops the entry."""
        if self.error is not None or self._finished:
            return
        try:
            operation(*arguments)
        except OSError as error:
            self.error = error
            self._abandon_now()
            self._on_failure(error)

    def _write_now(self, view: memoryview) -> None:
        rest = view
        while rest:
            done = os.write(self._fd, rest)
            rest = rest[done:]
        while view:
            piece = view[: BLOCK_BYTES - self._in_block]
            self._crc = crc32(piece, self._crc)
            self._in_block += len(piece)
            view = view[len(piece) :]
            if self._in_block == BLOCK_BYTES:
                self._block_crcs.append(self._crc)
                self._crc = self._in_block = 0

    def commit(self, etag: str) -> None:
        """Adds the footer and makes the entry visible atomically (once every write before it is done);
        then keeps the cache within budget."""
        self._hand_over(etag)

    def _commit_now(self, etag: str) -> None:
        if self._in_block:
            self._block_crcs.append(self._crc)
        tail = entry_footer(self.bucket, self.key, etag, self.written, self._block_crcs)
        os.write(self._fd, tail)
        os.close(self._fd)
        self._fd = -1
        path = self._store.entry_path(self.name)
        try:
            replaced = os.stat(path).st_size  # a stale or damaged entry of the same object
        except FileNotFoundError:
            replaced = 0
        os.rename(self.temp_path, path)
        self._finished = True
        self._release()
        self._store.added(self.written + len(tail) - replaced)

    def abandon(self) -> None:
        """Drops the partial entry, after the writes already asked for (idempotent)."""
        self._held, self._held_bytes = [], 0
        if self._handed_over:
            self._writes.submit(self._abandon_now)
        elif not self._finished:  # nothing on disk yet: let go of the lock here
            self._finished = True
            self._release()

    def _abandon_now(self) -> None:
        if not self._finished:  # not committed: the temp file goes
            self._finished = True
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.temp_path)
        self._release()

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None
            self._on_release()
