"""The local object cache's policy: when an entry may be served, when one is written, and what to do when
the disk says no. The files themselves are :mod:`torchdata_s3.cache.store`'s business.

Opt in with ``cache_dir`` (and ``cache_max_bytes``) on :class:`~torchdata_s3.S3Config` or the loader, or
``TORCHDATA_S3_CACHE_DIR`` / ``TORCHDATA_S3_CACHE_MAX_BYTES``. For each object the loader asks the cache
first:

- **Hit**: an entry of this bucket and key whose footer and size add up. When the listing gave the object's
  ETag, the entry's must match; otherwise a GET with ``If-None-Match: <entry's ETag>`` (started when the
  object is prefetched) asks S3: 304 Not Modified confirms the entry; a 200 is the changed object itself,
  which that same GET then delivers (and writes into a new entry). The reader gets an
  :class:`~torchdata_s3.reader.S3ObjectStream` over the local file: the same seekable file object as for an
  S3 read, with ``bytes_fetched == 0``. Each block of the entry is checked against its CRC-32 as it is
  read; a damaged one is never returned: the entry goes, and S3 serves the rest.
- **Miss** (no entry, a stale or corrupt one): the object is fetched as always and its bytes are written to
  a temp file as the reader receives them (by the cache's writes thread, :mod:`torchdata_s3.cache.writes`),
  under the entry's writer lock; once the reader has received every byte, from the first to the last, the
  entry is renamed into place. A stream closed before that (or read
  only in pieces, as a zip reader does) leaves no entry: the next epoch fetches it again.
- **Another process is writing it**: the loader waits for that writer (at most ``WRITER_WAIT_S``) and then
  reads the entry; if it waited in vain, it reads from S3 without caching.
- Objects larger than ``cache_max_bytes``, and empty ones, are read through.

A disk that fills up, a quota, or a directory that cannot be written turns caching off for the rest of the
process with one :class:`CacheUnavailableWarning`; the data still comes from S3.

``python -m torchdata_s3.cache DIR [--clear]`` reports (or clears) a cache; so do :func:`cache_info` and
:func:`clear_cache`.
"""

from __future__ import annotations

import argparse
import io
import os
import threading
import time
import warnings
from typing import TYPE_CHECKING, Any, Optional

from .. import _core
from ..errors import S3Error, S3FileNotFoundError
from ..reader import ObjectReader
from ..url import S3Url
from .entry import CacheEntry
from .entry_writer import EntryWriter
from .locks import WriterLock
from .store import CacheStats, CacheStore, quoted_etag, same_etag
from .streams import CachedObjectReader, WriteThroughReader

if TYPE_CHECKING:
    from ..client import S3Client
    from ..config import S3Config

__all__ = ["CacheUnavailableWarning", "ObjectCache", "cache_info", "clear_cache", "object_cache"]

# How long a loader waits for another process writing the same entry before it reads from S3 itself. A
# writer finishes when its reader has read the object, which for a training loop is well within this.
WRITER_WAIT_S = 60.0
_WAIT_STEP_S = 0.005
_WAIT_STEP_MAX_S = 0.1
_NOT_MODIFIED = 304  # the answer to If-None-Match when the object still has that ETag


class CacheUnavailableWarning(RuntimeWarning):
    """The cache cannot be written (full disk, quota, unwritable directory); data comes from S3 instead."""


_caches: dict[tuple[str, int, int], Optional[ObjectCache]] = {}
_caches_lock = threading.Lock()


def _forget_caches() -> None:
    # A fork child counts its own hits; the parent's unflushed counts stay the parent's. The lock may have
    # been held by another thread of the parent at the fork (it is held while a cache directory is opened).
    global _caches_lock
    _caches_lock = threading.Lock()
    _caches.clear()


os.register_at_fork(after_in_child=_forget_caches)


def object_cache(config: S3Config) -> Optional[ObjectCache]:
    """The process's cache for ``config`` (None when ``cache_dir`` is not set or the directory is unusable,
    which warns once)."""
    if config.cache_dir is None:
        return None
    memo = (config.cache_dir, config.cache_max_bytes, config.part_size_bytes)
    with _caches_lock:
        if memo not in _caches:
            try:
                _caches[memo] = ObjectCache(CacheStore(config.cache_dir, config.cache_max_bytes), config)
            except OSError as error:
                _warn(f"the cache directory {config.cache_dir!r} cannot be used ({error}); reading from S3")
                _caches[memo] = None
        return _caches[memo]


def _warn(message: str) -> None:
    warnings.warn(message, CacheUnavailableWarning, stacklevel=3)


class _Plan:
    """What the loader does for one object. ``needs_get``: open a GET at prefetch time, as without a cache."""

    needs_get = True

    def raw(
        self, client: S3Client, location: S3Url, native: Optional[_core.ObjectStream], **reader: Any
    ) -> io.RawIOBase:
        """The object's raw reader (``native``: the GET the loader started, if ``needs_get``)."""
        raise NotImplementedError

    def release(self) -> None:
        """Gives back what the plan holds (an entry, a lock) when its object is never opened."""


class _Hit(_Plan):
    needs_get = False

    def __init__(self, cache: ObjectCache, entry: CacheEntry, check: Optional[_core.ObjectStream]) -> None:
        self.cache, self.check = cache, check
        self.entry: Optional[CacheEntry] = entry  # None once a reader took it

    def raw(
        self, client: S3Client, location: S3Url, native: Optional[_core.ObjectStream], **reader: Any
    ) -> io.RawIOBase:
        if self.check is not None:
            check, self.check = self.check, None
            try:
                check.placement()  # waits for the answer: 304 (the entry's version) or the object
            except S3Error as error:
                check.close()
                if error.http_status != _NOT_MODIFIED:
                    # The GET's own failure, as it would be without the cache. A deleted object's entry
                    # goes; an endpoint that could not be asked says nothing against the entry.
                    if isinstance(error, S3FileNotFoundError):
                        self.cache.store.discard(location.bucket, location.key)
                    self.release()
                    raise
            else:
                # A new version: this GET is it. The stale entry is never served; the GET refills it.
                self.release()
                return self.cache.refresh(client, location, check, **reader)
        entry = self.entry
        if entry is None:
            raise RuntimeError(f"{location.bucket}/{location.key}: a cache hit was read twice")
        self.cache.count(hit=True)
        self.cache.store.touch(entry)
        self.entry = None  # the reader owns it now

        def refetch(position: int) -> io.RawIOBase:
            # A block failed its checksum: the entry goes, and S3 serves the object from there on, the
            # same version (If-Match). Nothing returned yet: fetch it whole and write a new entry.
            self.cache.store.discard(location.bucket, location.key, inode=entry.inode)
            if position == 0:
                return self.cache.plan(client, location, entry.size, "").raw(client, location, None, **reader)
            again = ObjectReader(client, location, **{**reader, "size": entry.size}, etag=entry.etag)
            again.seek(position)
            return again

        return CachedObjectReader(entry, location, reader.get("window_bytes"), refetch)

    def release(self) -> None:
        if self.check is not None:
            self.check.close()
            self.check = None
        if self.entry is not None:
            self.entry.close()


class _Fill(_Plan):
    """A miss whose writer lock this process holds: fetch, and write the bytes as the reader gets them."""

    def __init__(self, cache: ObjectCache, location: S3Url, lock: WriterLock) -> None:
        self.cache = cache
        self.lock: Optional[WriterLock] = lock
        self.name = (location.bucket, location.key)
        cache.writing_here.add(self.name)

    def raw(
        self, client: S3Client, location: S3Url, native: Optional[_core.ObjectStream], **reader: Any
    ) -> io.RawIOBase:
        if native is None:
            native = client.open_native(location, window_bytes=reader.get("window_bytes"))
        lock = self.lock
        writer = self.cache.writer(location, lock) if self.cache.writing and lock is not None else None
        if writer is None:
            self.release()
        self.lock = None  # the writer owns it
        if writer is None:
            return ObjectReader(client, location, stream=native, **reader)
        return WriteThroughReader(client, location, writer, self.cache, stream=native, **reader)

    def release(self) -> None:
        if self.lock is not None:
            self.lock.release()
            self.lock = None
            self.cache.writing_here.discard(self.name)


class _Wait(_Plan):
    """Another writer holds the entry's lock: wait for it when the object is reached."""

    needs_get = False

    def __init__(self, cache: ObjectCache, etag: str) -> None:
        self.cache, self.etag = cache, etag

    def raw(
        self, client: S3Client, location: S3Url, native: Optional[_core.ObjectStream], **reader: Any
    ) -> io.RawIOBase:
        # The writer may be a stream of this very process (the same object twice in one input) that will
        # not go on before this one is read: never wait for it.
        here = (location.bucket, location.key) in self.cache.writing_here
        lock = None if here else self.cache.wait_for_writer(location)
        if lock is None:  # waited in vain: read through
            self.cache.count(hit=False)
            return ObjectReader(client, location, **reader)
        hit = self.cache.hit(client, location, self.etag)
        if hit is not None:
            lock.release()
            return hit.raw(client, location, None, **reader)
        self.cache.count(hit=False)
        return _Fill(self.cache, location, lock).raw(client, location, None, **reader)


class ObjectCache:
    """One process's view of one cache directory: the policy of the module docstring over a CacheStore."""

    def __init__(self, store: CacheStore, config: S3Config) -> None:
        self.store = store
        self._config = config
        self._writing = True  # false after the disk refused a write: the rest of the process reads through
        self.writing_here: set[tuple[str, str]] = set()  # (bucket, key) of the entries this process writes
        self._failures: list[OSError] = []  # writes that failed on the writes' thread, not yet reported

    @property
    def writing(self) -> bool:
        """Whether this process still writes entries (false once the disk refused one)."""
        self._report_failures()
        return self._writing

    def _report_failures(self) -> None:
        # On the reader's thread, so that the warning reaches the code reading (and warnings filters).
        while self._failures:
            self.disk_refused(self._failures.pop())

    @property
    def max_bytes(self) -> int:
        return self.store.max_bytes

    def plan(self, client: S3Client, location: S3Url, size: Optional[int], etag: str) -> _Plan:
        """What to do for one object of known ``size`` and listing ``etag`` ("" and None when unknown);
        ``client`` sends the conditional GET that confirms an entry whose ETag the listing did not give."""
        if size is not None and not 0 < size <= self.max_bytes:
            return _ReadThrough()
        hit = self.hit(client, location, etag)
        if hit is not None:
            return hit
        if not self._writing:
            self.count(hit=False)
            return _ReadThrough()
        lock = self.store.try_lock(location.bucket, location.key)
        if lock is None:
            return _Wait(self, etag)
        hit = self.hit(client, location, etag)  # committed between the first look and the lock
        if hit is not None:
            lock.release()
            return hit
        self.count(hit=False)
        return _Fill(self, location, lock)

    def hit(self, client: S3Client, location: S3Url, etag: str) -> Optional[_Hit]:
        """The entry as a hit, if there is a sound one for this version (see the module docstring)."""
        entry = self.store.open_entry(location.bucket, location.key)
        if entry is None:
            return None
        if etag:
            if same_etag(entry.etag, etag):
                return _Hit(self, entry, None)
            entry.close()  # stale: a writer replaces it, and until then it is never served
            return None
        # The whole object, unless it is still the entry's version (304, no body). Until the answer is
        # read, at most one part of a changed object is buffered, as for an object the loader prefetches.
        check = client.open_native(
            location, if_none_match=quoted_etag(entry.etag), window_bytes=self._config.part_size_bytes
        )
        return _Hit(self, entry, check)

    def refresh(
        self, client: S3Client, location: S3Url, native: _core.ObjectStream, **reader: Any
    ) -> io.RawIOBase:
        """Reads a changed object from its GET ``native``, writing a new entry if no other process is."""
        self.count(hit=False)
        lock = self.store.try_lock(location.bucket, location.key) if self._writing else None
        if lock is None:
            return ObjectReader(client, location, stream=native, **reader)
        return _Fill(self, location, lock).raw(client, location, native, **reader)

    def writer(self, location: S3Url, lock: WriterLock) -> Optional[EntryWriter]:
        """A writer for the entry whose lock is ``lock``; None (lock still held) if the disk refused."""
        name = (location.bucket, location.key)
        try:
            return self.store.writer(
                location.bucket,
                location.key,
                lock,
                lambda: self.writing_here.discard(name),
                self._failures.append,
            )
        except OSError as error:
            self.disk_refused(error)
            return None

    def wait_for_writer(self, location: S3Url) -> Optional[WriterLock]:
        """The entry's lock once its other writer let go (bounded by WRITER_WAIT_S), or None."""
        deadline = time.monotonic() + WRITER_WAIT_S
        step = _WAIT_STEP_S
        while True:
            lock = self.store.try_lock(location.bucket, location.key)
            if lock is not None or time.monotonic() >= deadline:
                return lock
            time.sleep(step)
            step = min(2 * step, _WAIT_STEP_MAX_S)

    def disk_refused(self, error: OSError) -> None:
        """A write failed (full disk, quota, file-size limit, permissions, I/O error): turn writing off for
        this process, with one warning."""
        if self._writing:
            self._writing = False
            _warn(
                f"the cache in {self.store.directory!r} cannot be written ({error}); objects are read from "
                "S3 without caching for the rest of this process. Free space, raise the quota, fix the "
                "directory's permissions, or lower cache_max_bytes."
            )

    def count(self, *, hit: bool) -> None:
        self.store.count(hit)

    def flush_counts(self) -> None:
        """At the end of an epoch: waits for the entries being written, reports a disk that refused, and
        adds the counts to the shared state."""
        self.store.writes.drain()
        self._report_failures()
        self.store.flush_counts()


class _ReadThrough(_Plan):
    def raw(
        self, client: S3Client, location: S3Url, native: Optional[_core.ObjectStream], **reader: Any
    ) -> io.RawIOBase:
        return ObjectReader(client, location, stream=native, **reader)


def cache_info(cache_dir: str, max_bytes: Optional[int] = None) -> CacheStats:
    """The cache's entries, bytes in use and hits/misses so far (counted by every process using it)."""
    return CacheStore(cache_dir, max_bytes or 0).stats()


def clear_cache(cache_dir: str) -> None:
    """Deletes every entry of the cache in ``cache_dir`` (readers with an entry open keep reading it)."""
    CacheStore(cache_dir, 0).clear()


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torchdata_s3.cache", description=__doc__.split("\n")[0])
    parser.add_argument("cache_dir", nargs="?", default=os.environ.get("TORCHDATA_S3_CACHE_DIR"))
    parser.add_argument("--clear", action="store_true", help="delete every entry")
    arguments = parser.parse_args(argv)
    if not arguments.cache_dir:
        parser.error("name the cache directory (or set TORCHDATA_S3_CACHE_DIR)")
    if arguments.clear:
        clear_cache(arguments.cache_dir)
    stats = cache_info(arguments.cache_dir)
    print(
        f"{stats.directory}: {stats.entries} entries, {stats.bytes} bytes; "
        f"{stats.hits} hits, {stats.misses} misses (hit rate {stats.hit_rate:.1%})"
    )
    return 0
