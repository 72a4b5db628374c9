"""The two readers of the local cache: one that writes what it reads from S3 into an entry, one over an
entry. Both are what :class:`~torchdata_s3.reader.S3ObjectStream` wraps, so a cached object is the same
file object as one read from S3. When to use which is :mod:`torchdata_s3.cache`'s policy."""

from __future__ import annotations

import io
import os
from typing import TYPE_CHECKING, Any, Optional, Union

from . import _core
from .cache_store import CacheEntry, EntryWriter, is_disk_problem
from .reader import ObjectReader, seek_target
from .url import S3Url

if TYPE_CHECKING:
    from .cache import ObjectCache
    from .client import S3Client

__all__ = ["CachedObjectReader", "WriteThroughReader"]

# A chunk handed out by read_chunk() of a cached stream.
_CHUNK_BYTES = 8 * 1024 * 1024


class WriteThroughReader(ObjectReader):
    """An :class:`ObjectReader` that also writes the bytes it returns to a cache entry, in order, and
    commits the entry when the last byte was returned. Bytes read out of order are not written; reading
    back over them (or on from the end of what was written) continues the entry."""

    def __init__(
        self, client: S3Client, location: S3Url, writer: EntryWriter, cache: ObjectCache, **reader: Any
    ) -> None:
        super().__init__(client, location, **reader)
        self._writer: Optional[EntryWriter] = writer
        self._cache = cache

    def readinto(self, buffer: Any) -> int:
        start = self.tell()
        got = super().readinto(buffer)
        if got:
            self._record(start, memoryview(buffer).cast("B")[:got])
        return got

    def readall(self) -> bytes:
        start = self.tell()
        data = super().readall()
        self._record(start, memoryview(data))
        return data

    def read_chunk(self) -> Optional[Union[_core.Buffer, bytes]]:
        start = self.tell()
        chunk = super().read_chunk()
        if chunk is not None:
            self._record(start, memoryview(chunk).cast("B"))
        return chunk

    def close(self) -> None:
        if self._writer is not None:
            self._writer.abandon()
            self._writer = None
        super().close()

    def _record(self, start: int, data: memoryview) -> None:
        writer = self._writer
        if writer is None:
            return
        if not self._cache.writing:  # another entry found the disk full: do not try this one
            self._drop()
            return
        size = self.size_if_known
        if size is not None and not 0 < size <= self._cache.max_bytes:
            self._drop()
            return
        offset = writer.written - start
        try:
            if 0 <= offset < len(data):
                writer.write(data[offset:])
            if size is not None and writer.written == size:
                self._writer = None
                writer.commit(self.etag)
        except OSError as error:
            self._drop()
            if not is_disk_problem(error):
                raise
            self._cache.disk_refused(error)

    def _drop(self) -> None:
        if self._writer is not None:
            self._writer.abandon()
            self._writer = None


class CachedObjectReader(io.RawIOBase):
    """The raw reader of a cached object: its checked bytes in memory, or its local file (read with
    ``pread``, so a reader never disturbs another's position)."""

    def __init__(self, entry: CacheEntry, location: S3Url, window_bytes: Optional[int]) -> None:
        super().__init__()
        self.name = f"s3://{location.bucket}/{location.key}"
        self._entry = entry
        self._size = entry.size
        self._data = memoryview(entry.data) if entry.data is not None else None
        if self._data is not None:
            entry.close()  # every byte is in memory
        self._pos = 0
        self._window = window_bytes or _CHUNK_BYTES

    size = property(lambda self: self._size)
    size_if_known = property(lambda self: self._size)
    window_bytes = property(lambda self: self._window)
    etag = property(lambda self: self._entry.etag)
    bytes_fetched = property(lambda self: 0)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        self._check_open()
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._check_open()
        self._pos = seek_target(offset, whence, self._pos, lambda: self._size)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        self._check_open()
        view = memoryview(buffer).cast("B")
        count = max(0, min(len(view), self._size - self._pos))
        if not count:
            return 0
        if self._data is not None:
            view[:count] = self._data[self._pos : self._pos + count]
            got = count
        else:
            got = os.preadv(self._entry.fd, [view[:count]], self._pos)
        self._pos += got
        return got

    def readall(self) -> bytes:
        self._check_open()
        count = max(0, self._size - self._pos)
        if self._data is not None:
            data = bytes(self._data[self._pos : self._pos + count])
        else:
            data = os.pread(self._entry.fd, count, self._pos)
        self._pos += len(data)
        return data

    def read_chunk(self) -> Optional[bytes]:
        chunk = self.read(_CHUNK_BYTES)
        return chunk or None

    def close(self) -> None:
        if not self.closed:
            self._entry.close()
            self._data = None
        super().close()

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed file.")

    def __repr__(self) -> str:
        return f"<torchdata_s3 CachedObjectReader {self.name}>"
