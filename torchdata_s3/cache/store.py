"""The on-disk object cache: where entries live, how they are written, checked, locked and evicted.

Layout under ``cache_dir`` (one version folder, so a future format never misreads this one)::

    torchdata-s3-cache-v1/
        entries/<2 hex>/<32 hex>        an object's bytes, then a footer (JSON + length + magic)
        writers.lock                    every entry's writer lock: one byte each (see cache_locks.py)
        locks/<32 hex>.lock             an entry's writer lock where the OS lacks writers.lock's kind
        tmp/<2 hex>/<32 hex>.<pid>.<n>  entries being written, flock-ed by their writer, renamed when complete
        state, state.lock               bytes in use and hit/miss counters, updated under the lock

An entry's name is a hash of (bucket, key); its footer names the bucket, key, ETag and size, and holds the
CRC-32 of each block of its bytes (the format: :mod:`torchdata_s3.cache.entry`). Opening an entry checks its
footer and size; each block is checked when it is read, before any of its bytes reach the reader, so a hit
reads its bytes once. Entries are written by :mod:`torchdata_s3.cache.entry_writer`.
Entries appear by ``rename``, atomically: a reader sees a whole entry or none, and a writer killed mid-write
leaves only a temp file, which the next process to open the cache deletes once no live writer holds its lock.

Eviction (least recently used first; use is the entry's mtime, refreshed on a hit at most every
``TOUCH_AFTER_S``) unlinks files: a reader that has an entry open keeps reading it, because on POSIX an open
file stays readable after its name is gone.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Optional

from .entry import CacheEntry, CorruptEntry, checked_entry, entry_name
from .entry_writer import EntryWriter
from .locks import WriterLock, WriterLocks
from .writes import WriteThreads

__all__ = ["CacheStats", "CacheStore", "quoted_etag", "same_etag"]

VERSION_DIR = "torchdata-s3-cache-v1"
# A hit refreshes the entry's use time only if it is older than this: LRU to within a minute, for one
# syscall a minute per entry instead of one per hit.
TOUCH_AFTER_S = 60.0
# Eviction goes down to this share of the budget, so that a full cache scans its entries once per tenth of
# its budget written rather than at every new entry.
EVICT_TO_SHARE = 0.9
# Bytes this process adds are recorded in the shared state once they reach this fraction of the budget.
_BATCHES = 64
# Hit and miss counts are statistics: they are added to the shared state at the end of each pass of the
# loader, and otherwise at most this often (a state update costs a locked read and write of a file, which on
# the development machine's disk cost 1-3 ms: every 256 lookups, it was 5% of a hit).
_STATS_FLUSH_AFTER_S = 30.0
# More than the shared state's JSON ever takes (three integers).
_STATE_READ_BYTES = 4096


def same_etag(a: str, b: str) -> bool:
    """ETags compared as S3 means them: listings and GET headers may differ in quoting only."""
    return a.strip('"') == b.strip('"')


def quoted_etag(etag: str) -> str:
    """An ETag as conditional request headers want it: in double quotes."""
    return '"' + etag.strip('"') + '"'


@dataclass(frozen=True)
class CacheStats:
    """What :func:`torchdata_s3.cache.cache_info` reports."""

    directory: str
    entries: int
    bytes: int
    max_bytes: Optional[int]
    hits: int
    misses: int

    @property
    def hit_rate(self) -> float:
        lookups = self.hits + self.misses
        return self.hits / lookups if lookups else 0.0


class CacheStore:
    """The cache directory of one process (see the module docstring). Paths and budget only; no policy.

    Raises OSError from the constructor if the directory cannot be created.
    """

    def __init__(self, directory: str, max_bytes: int) -> None:
        self.directory = os.path.abspath(directory)
        self.root = os.path.join(self.directory, VERSION_DIR)
        self._entries_root = os.path.join(self.root, "entries")
        self.max_bytes = max_bytes
        self._temp_numbers = itertools.count()
        self.writes = WriteThreads()
        self._counts_lock = threading.Lock()  # counts and bytes change on the reader's and the writes' thread
        self._hits = self._misses = 0
        self._counts_flushed_at = time.monotonic()
        self._pending_bytes = 0  # added or removed here, not yet in the shared state
        self._known_bytes = 0  # the shared total when this process last saw it
        for sub in ("entries", "tmp", "locks"):
            os.makedirs(os.path.join(self.root, sub), exist_ok=True)
        self._folders: set[str] = set()  # the <2 hex> of entry and temp folders known to exist
        self._locks = WriterLocks(self.root)
        self._remove_dead_temps()

    # -- paths --------------------------------------------------------------------------------------------

    def entry_path(self, name: str) -> str:
        return f"{self._entries_root}/{name[:2]}/{name}"

    def temp_path(self, name: str) -> str:
        # In 256 folders, as the entries: a directory takes one file creation at a time (on the development
        # machine's disk each cost about 1 ms of kernel CPU), so the writes' threads create in different ones.
        return f"{self.root}/tmp/{name[:2]}/{name}.{os.getpid()}.{next(self._temp_numbers)}"

    # -- entries ------------------------------------------------------------------------------------------

    def open_entry(self, bucket: str, key: str) -> Optional[CacheEntry]:
        """The entry of (bucket, key), open, its footer and size checked; None if there is none. One whose
        footer or size does not add up (truncated, foreign, damaged footer) is deleted."""
        path = self.entry_path(entry_name(bucket, key))
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            entry = checked_entry(fd, bucket, key)
        except CorruptEntry:
            inode = os.fstat(fd).st_ino
            os.close(fd)
            self.discard(bucket, key, inode=inode)
            return None
        except BaseException:
            os.close(fd)
            raise
        return entry

    def touch(self, entry: CacheEntry) -> None:
        """Marks an entry used now (for LRU), at most once per ``TOUCH_AFTER_S``."""
        now = time.time()
        if now - entry.used_at > TOUCH_AFTER_S:
            with contextlib.suppress(OSError):
                os.utime(entry.fd, (now, now))

    def discard(self, bucket: str, key: str, *, inode: Optional[int] = None) -> None:
        """Deletes the entry of (bucket, key) (stale or corrupt); a reader holding it open keeps its bytes.
        With ``inode``, only if the entry is still that file (not one another writer just put in place)."""
        path = self.entry_path(entry_name(bucket, key))
        with contextlib.suppress(FileNotFoundError):
            info = os.stat(path)
            if inode is not None and info.st_ino != inode:
                return
            os.unlink(path)
            self.added(-info.st_size)

    def try_lock(self, bucket: str, key: str) -> Optional[WriterLock]:
        """The writer lock of (bucket, key), or None if another writer (of any process) holds it."""
        return self._locks.try_acquire(entry_name(bucket, key))

    def make_folder_of(self, name: str) -> None:
        """Creates the folders of entry ``name`` and of its temp files if this process has not seen them."""
        if name[:2] not in self._folders:
            os.makedirs(os.path.dirname(self.entry_path(name)), exist_ok=True)
            os.makedirs(os.path.join(self.root, "tmp", name[:2]), exist_ok=True)
            self._folders.add(name[:2])

    def writer(
        self,
        bucket: str,
        key: str,
        lock: WriterLock,
        on_release: Callable[[], None],
        on_failure: Callable[[OSError], None],
    ) -> EntryWriter:
        """A writer for (bucket, key), given its lock (``on_release``: called once it lets go of it;
        ``on_failure``: with a write's OSError, from the writes' thread). Raises OSError if the temp file
        cannot be made."""
        return EntryWriter(self, bucket, key, lock, on_release, self.writes.queue(), on_failure)

    # -- budget and statistics ----------------------------------------------------------------------------

    def added(self, delta: int) -> None:
        """Records ``delta`` bytes more (or fewer) in use. The shared total is updated (and least recently
        used entries evicted beyond the budget) in batches, to spare small objects a locked update each:
        when the bytes not yet recorded could take the total past the budget, reach ``1 / _BATCHES`` of it,
        and at every flush."""
        with self._counts_lock:
            self._pending_bytes += delta
            flush = (
                self._known_bytes + self._pending_bytes > self.max_bytes
                or abs(self._pending_bytes) * _BATCHES >= self.max_bytes
            )
        if flush:
            self.flush_counts()

    def count(self, hit: bool) -> None:
        with self._counts_lock:
            if hit:
                self._hits += 1
            else:
                self._misses += 1
        if time.monotonic() - self._counts_flushed_at > _STATS_FLUSH_AFTER_S:
            self.flush_counts()

    def flush_counts(self) -> None:
        """Adds this process's counts and bytes to the shared state; evicts if the total is over budget."""
        with self._counts_lock:
            self._counts_flushed_at = time.monotonic()
            if self._hits or self._misses or self._pending_bytes:
                with contextlib.suppress(OSError), self._state() as state:
                    self._flush_counts(state)

    def stats(self) -> CacheStats:
        self.flush_counts()
        entries, total = 0, 0
        for _path, size, _mtime in self._entries():
            entries += 1
            total += size
        with self._state() as state:
            return CacheStats(self.directory, entries, total, self.max_bytes, state["hits"], state["misses"])

    def clear(self) -> None:
        """Deletes every entry, lock file, temp file of a dead writer and the counters. Meant for a cache
        nobody writes to at the time: a writer that holds a lock file being deleted loses its exclusion."""
        with self._state() as state:
            for path, _size, _mtime in self._entries():
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            entries = os.path.join(self.root, "entries")
            for folder in os.listdir(entries):
                for name in os.listdir(os.path.join(entries, folder)):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(os.path.join(entries, folder, name))
            locks = os.path.join(self.root, "locks")
            for name in os.listdir(locks):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(locks, name))
            state.update(bytes=0, hits=0, misses=0)
            self._hits = self._misses = self._pending_bytes = self._known_bytes = 0
        self._remove_dead_temps()

    def _flush_counts(self, state: dict) -> None:
        state["hits"] += self._hits
        state["misses"] += self._misses
        state["bytes"] = max(0, state["bytes"] + self._pending_bytes)
        self._hits = self._misses = self._pending_bytes = 0
        if self.max_bytes and state["bytes"] > self.max_bytes:
            state["bytes"] = self._evict_to(int(self.max_bytes * EVICT_TO_SHARE))
        self._known_bytes = state["bytes"]

    @contextlib.contextmanager
    def _state(self) -> Iterator[dict]:
        """The shared state, read and written under its lock."""
        lock = os.open(os.path.join(self.root, "state.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            # Rewritten in place, under the lock: making a new file and renaming it over the old one cost 1-3
            # ms on the development machine's disk. A crash mid-write leaves JSON that does not parse, which
            # counts as a lost state (below).
            fd = os.open(os.path.join(self.root, "state"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                try:
                    state = json.loads(os.pread(fd, _STATE_READ_BYTES, 0))
                    if not isinstance(state, dict) or not {"bytes", "hits", "misses"} <= state.keys():
                        raise ValueError("not a state")
                except ValueError:
                    # First use, or a state lost with a crash: the entries themselves are the truth.
                    state = {"bytes": sum(size for _p, size, _m in self._entries()), "hits": 0, "misses": 0}
                yield state
                data = json.dumps(state).encode()
                os.pwrite(fd, data, 0)
                os.ftruncate(fd, len(data))
            finally:
                os.close(fd)
        finally:
            os.close(lock)

    def _entries(self) -> Iterator[tuple[str, int, float]]:
        entries = os.path.join(self.root, "entries")
        for folder in os.scandir(entries):
            if not folder.is_dir():
                continue
            for item in os.scandir(folder.path):
                if item.name.endswith(".lock"):
                    continue
                with contextlib.suppress(FileNotFoundError):
                    info = item.stat()
                    yield item.path, info.st_size, info.st_mtime

    def _evict_to(self, budget: int) -> int:
        """Unlinks the least recently used entries until the rest fit ``budget``; returns the bytes left."""
        entries = sorted(self._entries(), key=lambda entry: entry[2])
        total = sum(size for _path, size, _mtime in entries)
        for path, size, _mtime in entries:
            if total <= budget:
                break
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
                total -= size
        return total

    def _remove_dead_temps(self) -> None:
        """Deletes temp files no live writer holds (their writer was killed mid-write)."""
        temps = os.path.join(self.root, "tmp")
        items: list[os.DirEntry[str]] = []
        for item in os.scandir(temps):
            if item.is_dir():
                items.extend(os.scandir(item.path))
            else:
                items.append(item)  # the layout before temp folders
        for item in items:
            try:
                fd = os.open(item.path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a writer is at work
            finally:
                os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(item.path)
