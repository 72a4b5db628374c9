"""The on-disk object cache: where entries live, how they are written, checked, locked and evicted.

Layout under ``cache_dir`` (one version folder, so a future format never misreads this one)::

    torchdata-s3-cache-v1/
        entries/<2 hex>/<32 hex>        an object's bytes, then a footer (JSON + length + magic)
        entries/<2 hex>/<32 hex>.lock   its writer lock (flock; empty; deleted only by clear)
        tmp/<32 hex>.<pid>.<n>          entries being written, flock-ed by their writer, renamed when complete
        state, state.lock               bytes in use and hit/miss counters, updated under the lock

An entry's name is a hash of (bucket, key); its footer names the bucket, key, ETag, size and CRC-32 of the
bytes, so an entry is trusted only for that version and only if its bytes add up. Entries appear by
``rename``, atomically: a reader sees a whole entry or none, and a writer killed mid-write leaves only a
temp file, which the next process to open the cache deletes once no live writer holds its lock.

Eviction (least recently used first; use is the entry's mtime, refreshed on a hit at most every
``TOUCH_AFTER_S``) unlinks files: a reader that has an entry open keeps reading it, because on POSIX an open
file stays readable after its name is gone.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import itertools
import json
import os
import struct
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Optional

__all__ = ["CacheEntry", "CacheStats", "CacheStore", "EntryWriter"]

VERSION_DIR = "torchdata-s3-cache-v1"
_MAGIC = b"TDS3CAC1"
_TAIL = struct.Struct("<I8s")  # footer JSON length, magic: the entry's last 12 bytes
# A hit refreshes the entry's use time only if it is older than this: LRU to within a minute, for one
# syscall a minute per entry instead of one per hit.
TOUCH_AFTER_S = 60.0
# Eviction goes down to this share of the budget, so that a full cache scans its entries once per tenth of
# its budget written rather than at every new entry.
EVICT_TO_SHARE = 0.9
# Bytes this process adds are recorded in the shared state once they reach this fraction of the budget.
_BATCHES = 64
# Hit and miss counts are added to the shared state after this many lookups (and when the process exits).
_STATS_FLUSH_EVERY = 256
_CHECK_CHUNK_BYTES = 8 * 1024 * 1024
# A small entry is read whole, footer included, in one call: its footer is assumed to fit in this.
_FOOTER_ALLOWANCE = 4096


def entry_name(bucket: str, key: str) -> str:
    return hashlib.blake2b(f"{bucket}\0{key}".encode(), digest_size=16).hexdigest()


def same_etag(a: str, b: str) -> bool:
    """ETags compared as S3 means them: listings and GET headers may differ in quoting only."""
    return a.strip('"') == b.strip('"')


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


class CorruptEntry(Exception):
    """An entry whose footer or bytes do not add up (truncated, flipped, foreign)."""


@dataclass
class CacheEntry:
    """A checked entry, open: its descriptor keeps the bytes readable even if the entry is evicted."""

    fd: int
    bucket: str
    key: str
    etag: str
    size: int
    data: Optional[memoryview]  # the bytes, when read whole to check them (small entries)
    used_at: float  # the entry's mtime when opened: its last use

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class EntryWriter:
    """Writes one entry to a temp file as bytes arrive in order; :meth:`commit` renames it into place."""

    def __init__(
        self, store: CacheStore, bucket: str, key: str, lock_fd: int, on_release: Callable[[], None]
    ) -> None:
        self._store = store
        self._on_release = on_release
        self.bucket, self.key = bucket, key
        self.name = entry_name(bucket, key)
        self._lock_fd = lock_fd
        self.temp_path = store.temp_path(self.name)
        self._fd = os.open(self.temp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        # Marks the temp file as having a live writer, for the clean-up of those killed mid-write.
        fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self.written = 0
        self._crc = 0

    def write(self, data: memoryview) -> None:
        """Appends bytes. Raises OSError (disk full, quota, ...): the caller abandons the entry."""
        view = memoryview(data).cast("B")
        while view:
            done = os.write(self._fd, view)
            view = view[done:]
        self._crc = zlib.crc32(data, self._crc)
        self.written += len(data)

    def commit(self, etag: str) -> None:
        """Adds the footer and makes the entry visible atomically; then keeps the cache within budget."""
        footer = json.dumps(
            {"bucket": self.bucket, "key": self.key, "etag": etag, "size": self.written, "crc32": self._crc}
        ).encode()
        tail = footer + _TAIL.pack(len(footer), _MAGIC)
        os.write(self._fd, tail)
        os.close(self._fd)
        self._fd = -1
        path = self._store.entry_path(self.name)
        try:
            replaced = os.stat(path).st_size  # a stale or damaged entry of the same object
        except FileNotFoundError:
            replaced = 0
        os.rename(self.temp_path, path)
        self._release()
        self._store.added(self.written + len(tail) - replaced)

    def abandon(self) -> None:
        """Drops the partial entry (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.temp_path)
        self._release()

    def _release(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # closing the descriptor releases its flock
            self._lock_fd = -1
            self._on_release()


class CacheStore:
    """The cache directory of one process (see the module docstring). Paths and budget only; no policy.

    Raises OSError from the constructor if the directory cannot be created.
    """

    def __init__(self, directory: str, max_bytes: int) -> None:
        self.directory = os.path.abspath(directory)
        self.root = os.path.join(self.directory, VERSION_DIR)
        self.max_bytes = max_bytes
        self._temp_numbers = itertools.count()
        self._hits = self._misses = self._lookups = 0
        self._pending_bytes = 0  # added or removed here, not yet in the shared state
        self._known_bytes = 0  # the shared total when this process last saw it
        for sub in ("entries", "tmp"):
            os.makedirs(os.path.join(self.root, sub), exist_ok=True)
        self._remove_dead_temps()

    # -- paths --------------------------------------------------------------------------------------------

    def entry_path(self, name: str) -> str:
        return os.path.join(self.root, "entries", name[:2], name)

    def temp_path(self, name: str) -> str:
        return os.path.join(self.root, "tmp", f"{name}.{os.getpid()}.{next(self._temp_numbers)}")

    # -- entries ------------------------------------------------------------------------------------------

    def open_entry(self, bucket: str, key: str, *, keep_bytes_up_to: int) -> Optional[CacheEntry]:
        """The checked entry of (bucket, key), open; None if there is none. A corrupt one is deleted.

        Entries up to ``keep_bytes_up_to`` are read whole once, checked, and served from memory; larger
        ones are checked by reading them through, then served from the file.
        """
        path = self.entry_path(entry_name(bucket, key))
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            entry = _checked_entry(fd, bucket, key, keep_bytes_up_to)
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

    def try_lock(self, bucket: str, key: str) -> Optional[int]:
        """The writer lock of (bucket, key) as an open descriptor, or None if another writer holds it."""
        name = entry_name(bucket, key)
        folder = os.path.dirname(self.entry_path(name))
        os.makedirs(folder, exist_ok=True)
        fd = os.open(os.path.join(folder, name + ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        return fd

    def writer(self, bucket: str, key: str, lock_fd: int, on_release: Callable[[], None]) -> EntryWriter:
        """A writer for (bucket, key), given its lock (``on_release``: called once it lets go of it).
        Raises OSError if the temp file cannot be made."""
        return EntryWriter(self, bucket, key, lock_fd, on_release)

    # -- budget and statistics ----------------------------------------------------------------------------

    def added(self, delta: int) -> None:
        """Records ``delta`` bytes more (or fewer) in use. The shared total is updated (and least recently
        used entries evicted beyond the budget) in batches, to spare small objects a locked update each:
        when the bytes not yet recorded could take the total past the budget, reach ``1 / _BATCHES`` of it,
        and at every flush."""
        self._pending_bytes += delta
        if (
            self._known_bytes + self._pending_bytes > self.max_bytes
            or abs(self._pending_bytes) * _BATCHES >= self.max_bytes
        ):
            self.flush_counts()

    def count(self, hit: bool) -> None:
        if hit:
            self._hits += 1
        else:
            self._misses += 1
        self._lookups += 1
        if self._lookups % _STATS_FLUSH_EVERY == 0:
            self.flush_counts()

    def flush_counts(self) -> None:
        """Adds this process's counts and bytes to the shared state; evicts if the total is over budget."""
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
            path = os.path.join(self.root, "state")
            try:
                with open(path, encoding="utf-8") as file:
                    state = json.load(file)
            except (OSError, ValueError):
                # First use, or a state lost with a crash: the entries themselves are the truth.
                state = {"bytes": sum(size for _p, size, _m in self._entries()), "hits": 0, "misses": 0}
            yield state
            temp = f"{path}.{os.getpid()}"
            with open(temp, "w", encoding="utf-8") as file:
                json.dump(state, file)
            os.replace(temp, path)
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
        for item in os.scandir(temps):
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


def _checked_entry(fd: int, bucket: str, key: str, keep_bytes_up_to: int) -> CacheEntry:
    """Reads and checks an entry's footer and bytes. Raises CorruptEntry if anything does not add up."""
    info = os.fstat(fd)
    total = info.st_size
    if total < _TAIL.size:
        raise CorruptEntry("shorter than a footer")
    whole: Optional[memoryview] = None
    if total <= keep_bytes_up_to + _FOOTER_ALLOWANCE:
        whole = memoryview(os.pread(fd, total, 0))  # small: bytes and footer in one read
        if len(whole) != total:
            raise CorruptEntry("shorter than its size")
        tail = bytes(whole[-_TAIL.size :])
    else:
        tail = os.pread(fd, _TAIL.size, total - _TAIL.size)
    footer_length, magic = _TAIL.unpack(tail)
    if magic != _MAGIC or footer_length > total - _TAIL.size:
        raise CorruptEntry("no footer")
    size = total - _TAIL.size - footer_length
    raw_footer = (
        whole[size : size + footer_length] if whole is not None else os.pread(fd, footer_length, size)
    )
    try:
        footer = json.loads(bytes(raw_footer))
        ok = footer["bucket"] == bucket and footer["key"] == key and footer["size"] == size
        etag, expected_crc = str(footer["etag"]), int(footer["crc32"])
    except (ValueError, KeyError, TypeError) as error:
        raise CorruptEntry("unreadable footer") from error
    if not ok:
        raise CorruptEntry("footer of another object or size")
    data: Optional[memoryview] = None
    if whole is not None:
        data = whole[:size]
        got, crc = size, zlib.crc32(data)
    else:
        crc, got = 0, 0
        while got < size:
            chunk = os.pread(fd, min(_CHECK_CHUNK_BYTES, size - got), got)
            if not chunk:
                break
            crc = zlib.crc32(chunk, crc)
            got += len(chunk)
    if got != size or crc != expected_crc:
        raise CorruptEntry("bytes do not match the checksum")
    return CacheEntry(fd, bucket, key, etag, size, data, info.st_mtime)


def is_disk_problem(error: OSError) -> bool:
    """Whether a write failed because of the disk or the directory (then the cache steps aside)."""
    return error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EACCES, errno.EPERM, errno.EROFS)
