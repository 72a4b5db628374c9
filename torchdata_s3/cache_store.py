"""The on-disk object cache: where entries live, how they are written, checked, locked and evicted.

Layout under ``cache_dir`` (one version folder, so a future format never misreads this one)::

    torchdata-s3-cache-v1/
        entries/<2 hex>/<32 hex>        an object's bytes, then a footer (JSON + length + magic)
        writers.lock                    every entry's writer lock: one byte each (see cache_locks.py)
        locks/<32 hex>.lock             an entry's writer lock where the OS lacks writers.lock's kind
        tmp/<2 hex>/<32 hex>.<pid>.<n>  entries being written, flock-ed by their writer, renamed when complete
        state, state.lock               bytes in use and hit/miss counters, updated under the lock

An entry's name is a hash of (bucket, key); its footer names the bucket, key, ETag and size, and holds the
CRC-32 of each block of ``BLOCK_BYTES`` of the bytes, so an entry is trusted only for that version and only
as far as its bytes add up. Opening an entry checks its footer and size; each block is checked when it is
read, before any of its bytes reach the reader (see :class:`CacheEntry`), so a hit reads its bytes once.
Entries appear by ``rename``, atomically: a reader sees a whole entry or none, and a writer killed mid-write
leaves only a temp file, which the next process to open the cache deletes once no live writer holds its lock.

Eviction (least recently used first; use is the entry's mtime, refreshed on a hit at most every
``TOUCH_AFTER_S``) unlinks files: a reader that has an entry open keeps reading it, because on POSIX an open
file stays readable after its name is gone.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import itertools
import json
import os
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Optional

try:
    # CRC-32 with SIMD (ISA-L): the same values as zlib.crc32, at 4-12x its speed on the development machine.
    # Every hit checks every byte of its entry once, so this is most of what a hit costs beyond the read.
    from isal.isal_zlib import crc32
except ImportError:  # a platform without isal's wheel: the same checksums, computed more slowly
    from zlib import crc32

from .cache_locks import WriterLock, WriterLocks
from .cache_writes import BackgroundWrites, WriteThreads

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
# Hit and miss counts are statistics: they are added to the shared state at the end of each pass of the
# loader, and otherwise at most this often (a state update costs a locked read and write of a file, which on
# the development machine's disk cost 1-3 ms: every 256 lookups, it was 5% of a hit).
_STATS_FLUSH_AFTER_S = 30.0
# Each block of an entry has its own CRC-32, checked when the block is read: a reader gets every byte after
# its block was checked, and reads each byte from disk once (a whole-entry checksum would need a pass of
# its own before the first byte). 1 MiB: the read size of a sequential reader, so its reads go straight
# into its own buffer; a 1 GiB entry's footer holds 1,024 checksums (about 11 kB).
BLOCK_BYTES = 1024 * 1024
# The footer is read with one pread of the entry's last this many bytes (more only for a larger footer): a
# small object's footer is about 200 bytes, a 1 GiB object's about 11 kB.
_TAIL_READ_BYTES = 4 * 1024
# An entry's writer hands its bytes to the writes' thread in batches of at least this many (or at commit).
_HOLD_BYTES = BLOCK_BYTES
# More than the shared state's JSON ever takes (three integers).
_STATE_READ_BYTES = 4096


def entry_name(bucket: str, key: str) -> str:
    return hashlib.blake2b(f"{bucket}\0{key}".encode(), digest_size=16).hexdigest()


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


class CorruptEntry(Exception):
    """An entry whose footer or bytes do not add up (truncated, flipped, foreign)."""


class CacheEntry:
    """An entry whose footer and size were checked, open: its descriptor keeps the bytes readable even if
    the entry is evicted. Its bytes are checked block by block as they are read (:meth:`check_blocks`).
    (A plain class with slots: one is made per hit.)"""

    __slots__ = ("block_bytes", "block_crcs", "bucket", "etag", "fd", "inode", "key", "size", "used_at")

    def __init__(
        self,
        fd: int,
        bucket: str,
        key: str,
        etag: str,
        size: int,
        block_bytes: int,
        block_crcs: list[int],
        used_at: float,  # the entry's mtime when opened: its last use
        inode: int,
    ) -> None:
        self.fd, self.bucket, self.key, self.etag, self.size = fd, bucket, key, etag, size
        self.block_bytes, self.block_crcs, self.used_at, self.inode = block_bytes, block_crcs, used_at, inode

    def check_blocks(self, first_block: int, data: memoryview) -> None:
        """Checks ``data``, the bytes of whole blocks from ``first_block`` on (the entry's last block may be
        short). Raises CorruptEntry if any block's CRC-32 differs."""
        step = self.block_bytes
        if len(data) <= step:  # one block: a small object's whole entry
            if crc32(data) != self.block_crcs[first_block]:
                raise CorruptEntry(f"block {first_block} does not match its checksum")
            return
        for offset in range(0, len(data), step):
            if crc32(data[offset : offset + step]) != self.block_crcs[first_block + offset // step]:
                raise CorruptEntry(f"block {first_block + offset // step} does not match its checksum")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


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
        footer = json.dumps(
            {
                "bucket": self.bucket,
                "key": self.key,
                "etag": etag,
                "size": self.written,
                "block_bytes": BLOCK_BYTES,
                "block_crc32": self._block_crcs,
            }
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
            entry = _checked_entry(fd, bucket, key)
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
        items = []
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


# json's own scanner without json.loads' whitespace regexes around it: a footer has none (json.dumps), and
# the footer's parse is a third of what opening a small entry costs in Python.
_SCAN_JSON = json.JSONDecoder().scan_once


def _parse_footer(raw: bytes) -> object:
    """The footer's JSON value. Raises ValueError if ``raw`` is not exactly one JSON value."""
    text = raw.decode()
    try:
        value, end = _SCAN_JSON(text, 0)
    except StopIteration:  # the scanner's way of saying "no value here"
        raise ValueError("not JSON") from None
    if end != len(text):
        raise ValueError("bytes after the JSON value")
    return value


def _checked_entry(fd: int, bucket: str, key: str) -> CacheEntry:
    """Reads and checks an entry's footer against its size. Raises CorruptEntry if they do not add up."""
    info = os.fstat(fd)
    total = info.st_size
    if total < _TAIL.size:
        raise CorruptEntry("shorter than a footer")
    tail_read = min(total, _TAIL_READ_BYTES)
    tail = os.pread(fd, tail_read, total - tail_read)
    footer_length, magic = _TAIL.unpack(tail[-_TAIL.size :])
    if magic != _MAGIC or footer_length > total - _TAIL.size:
        raise CorruptEntry("no footer")
    size = total - _TAIL.size - footer_length
    if footer_length + _TAIL.size <= tail_read:
        raw_footer = tail[tail_read - _TAIL.size - footer_length : tail_read - _TAIL.size]
    else:
        raw_footer = os.pread(fd, footer_length, size)
    try:
        footer = _parse_footer(raw_footer)
        etag, block_bytes = str(footer["etag"]), int(footer["block_bytes"])
        block_crcs = [int(crc) for crc in footer["block_crc32"]]
        ok = footer["bucket"] == bucket and footer["key"] == key and footer["size"] == size
    except (ValueError, KeyError, TypeError) as error:  # also a footer of another format
        raise CorruptEntry("unreadable footer") from error
    if not ok:
        raise CorruptEntry("footer of another object or size")
    if block_bytes <= 0 or len(block_crcs) != -(-size // block_bytes):
        raise CorruptEntry("footer with the wrong number of block checksums")
    return CacheEntry(fd, bucket, key, etag, size, block_bytes, block_crcs, info.st_mtime, info.st_ino)
