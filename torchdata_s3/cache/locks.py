"""The local cache's writer locks: one writer per entry across every process sharing a cache directory.

Each entry's lock is one byte of ``<cache>/torchdata-s3-cache-v1/writers.lock``, at an offset taken from the
entry's name, locked with an open-file-description lock (Linux's ``F_OFD_SETLK``): taking and releasing it
is one ``fcntl`` call each (the file is open only while the process holds a lock), and the kernel releases
it when its process dies. Until this version a lock was
an ``flock`` on a file of its own, ``locks/<name>.lock``, created at an object's first miss: on the
development machine's disk, creating a file cost 0.2-2.5 ms, on the reader's thread, for every object of a
first epoch (the lock files were most of its cost for small objects). Where ``F_OFD_SETLK`` does not exist
(not Linux), the lock files are still used.

Within one process a lock is exclusive too (as an ``flock`` on a file opened twice is): a second stream
that wants an entry this process is writing sees it locked, as it would if another process wrote it.

A process of an older version, which takes the ``locks/`` files, does not exclude one of this version: two
such processes may both write an entry at once. Entries appear by ``rename``, so that costs a second
download, never a mixed entry.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import threading
import weakref
from typing import Optional

__all__ = ["WriterLock", "WriterLocks"]

_OFD_SETLK: Optional[int] = getattr(fcntl, "F_OFD_SETLK", None)
# struct flock on Linux: l_type, l_whence (shorts), l_start, l_len (off_t), l_pid (pid_t, 0 for OFD locks).
_FLOCK = struct.Struct("hh4xqqi4x")
_BUSY = (errno.EAGAIN, errno.EACCES)  # another holder (POSIX allows either)

_open_lock_files: weakref.WeakSet[WriterLocks] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    # The child shares the parent's open file description, and with it the parent's locks: it reopens the
    # file, so that its own locks are its own and the parent's are not held on its behalf.
    for locks in list(_open_lock_files):
        locks.forget_inherited()


os.register_at_fork(after_in_child=_after_fork_in_child)


class WriterLock:
    """One entry's writer lock, held until :meth:`release` (idempotent; any thread)."""

    __slots__ = ("_locks", "_offset", "_token")

    def __init__(self, locks: WriterLocks, offset: int, token: int) -> None:
        # token: the lock file's descriptor (flock), or the process generation that took it (OFD)
        self._locks: Optional[WriterLocks] = locks
        self._offset, self._token = offset, token

    def release(self) -> None:
        locks, self._locks = self._locks, None
        if locks is not None:
            locks.release(self._offset, self._token)


class WriterLocks:
    """The writer locks of one cache directory (``root``: its version folder), for one process."""

    def __init__(self, root: str) -> None:
        self._root = root
        self._guard = threading.Lock()
        self._held: set[int] = set()  # offsets this process holds (OFD locks of one description share)
        # Open while this process holds a lock, closed when it holds none: an open file would keep the
        # cache's file system busy (it could not be unmounted while the process lives).
        self._fd = -1
        self._generation = 0  # one more in each fork child: locks of an earlier one are the parent's
        _open_lock_files.add(self)

    def _open(self) -> int:
        return os.open(os.path.join(self._root, "writers.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def try_acquire(self, name: str) -> Optional[WriterLock]:
        """The writer lock of entry ``name``, or None if another writer (of any process) holds it."""
        if _OFD_SETLK is None:
            return self._try_lock_file(name)
        offset = int(name[:15], 16)  # 60 bits of the entry's hash: a shared byte would only make one wait
        with self._guard:
            if offset in self._held:
                return None
            if self._fd < 0:
                self._fd = self._open()
            try:
                fcntl.fcntl(self._fd, _OFD_SETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, offset, 1, 0))
            except OSError as error:
                self._close_if_unused()
                if error.errno in _BUSY:
                    return None
                raise
            self._held.add(offset)
            return WriterLock(self, offset, self._generation)

    def release(self, offset: int, token: int) -> None:
        if _OFD_SETLK is None:
            os.close(token)  # closing the lock file's descriptor releases its flock
            return
        with self._guard:
            if token != self._generation or offset not in self._held:
                return  # taken before a fork, by the parent: not this process's to release
            self._held.discard(offset)
            fcntl.fcntl(self._fd, _OFD_SETLK, _FLOCK.pack(fcntl.F_UNLCK, os.SEEK_SET, offset, 1, 0))
            self._close_if_unused()

    def _close_if_unused(self) -> None:
        if not self._held and self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def forget_inherited(self) -> None:
        """In a fork child: lets go of the parent's description (its locks stay the parent's)."""
        self._guard = threading.Lock()  # the parent's may have been held by another thread at the fork
        if self._fd >= 0:
            os.close(self._fd)  # the parent's own descriptor keeps its locks
        self._fd = -1
        self._held = set()
        self._generation += 1

    def _try_lock_file(self, name: str) -> Optional[WriterLock]:
        path = os.path.join(self._root, "locks", name + ".lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        return WriterLock(self, 0, fd)
