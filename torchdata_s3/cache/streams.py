"""The two readers of the local cache: one that writes what it reads from S3 into an entry, one over an
entry. Both are what :class:`~torchdata_s3.reader.S3ObjectStream` wraps, so a cached object is the same
file object as one read from S3. When to use which is :mod:`torchdata_s3.cache`'s policy."""

from __future__ import annotations

import io
import os
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from .. import _core
from ..reader import ObjectReader, seek_target
from ..url import S3Url
from .entry import CacheEntry, CorruptEntry
from .entry_writer import EntryWriter

if TYPE_CHECKING:
    from ..client import S3Client
    from .object_cache import ObjectCache

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

    def read_in_order(self, size: int) -> Optional[bytes]:
        start = self.tell()
        data = super().read_in_order(size)
        if data is not None:
            self._record(start, memoryview(data))
        return data

    def read_chunk(self) -> Optional[Union[_core.Buffer, bytes]]:
        start = self.tell()
        chunk = super().read_chunk()
        if chunk is not None:
            self._record(start, memoryview(chunk).cast("B"))
        return chunk

    def line_stream(self, wanted: int) -> Optional[_core.ObjectStream]:
        """None: lines cut natively would never pass through here to be written; lines then come through
        readinto, which writes them."""
        return None

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
        except OSError as error:  # an earlier write of this entry failed: the data itself is fine
            self._drop()
            self._cache.disk_refused(error)

    def _drop(self) -> None:
        if self._writer is not None:
            self._writer.abandon()
            self._writer = None


class CachedObjectReader(io.RawIOBase):
    """The raw reader of a cached object: its entry's file, read with ``pread`` (so a reader never disturbs
    another's position), each block checked against its CRC-32 before any of its bytes are returned.

    Reads of whole blocks go straight into the caller's buffer and are checked there: a sequential reader's
    bytes are copied once, from the page cache, as from a plain file. Other reads go through one block
    buffer. A block that does not match its checksum is never returned: ``refetch(position)`` (the
    policy's) drops the entry and gives the raw reader that serves the rest, from S3.
    """

    def __init__(
        self,
        entry: CacheEntry,
        location: S3Url,
        window_bytes: Optional[int],
        refetch: Callable[[int], io.RawIOBase],
    ) -> None:
        super().__init__()
        self.location = location
        self.name = f"s3://{location.bucket}/{location.key}"
        self._entry = entry
        self._size = entry.size
        self._refetch = refetch
        self._s3: Optional[Any] = None  # after a damaged block: the reader that serves the rest
        self._block = bytearray()  # one checked block, for reads that are not whole blocks
        self._block_index = -1
        self._pos = 0
        self._window = window_bytes or _CHUNK_BYTES

    size = property(lambda self: self._size)
    size_if_known = property(lambda self: self._size)
    window_bytes = property(lambda self: self._window)

    @property
    def etag(self) -> str:
        return self._s3.etag if self._s3 is not None else self._entry.etag

    @property
    def bytes_fetched(self) -> int:
        return self._s3.bytes_fetched if self._s3 is not None else 0

    def expect_read(self, end: int) -> None:
        """Where the caller's read ends (ObjectReader.expect_read): the S3 reader serving the rest, after a
        damaged block, sizes its GETs by it; blocks read from the cache need no hint."""
        if self._s3 is not None:
            self._s3.expect_read(end)

    def read_in_order(self, size: int) -> Optional[bytes]:
        """ObjectReader.read_in_order: None, the file's blocks are read (and checked) by readinto."""
        return None

    def line_stream(self, wanted: int) -> Optional[_core.ObjectStream]:
        """ObjectReader.line_stream: None, there is no download to cut lines from."""
        return None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        self._check_open()
        return self._s3.tell() if self._s3 is not None else self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._check_open()
        if self._s3 is not None:
            return self._s3.seek(offset, whence)
        self._pos = seek_target(offset, whence, self._pos, lambda: self._size)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        self._check_open()
        if self._s3 is None:
            view = memoryview(buffer).cast("B")
            count = max(0, min(len(view), self._size - self._pos))
            if not count:
                return 0
            try:
                got = self._read_checked(view[:count])
            except CorruptEntry:
                self._leave_entry()
            else:
                self._pos += got
                return got
        return self._s3.readinto(buffer)  # type: ignore[union-attr]

    def readall(self) -> bytes:
        self._check_open()
        if self._s3 is None and self._pos >= self._size:
            return b""  # the second read() of a read loop
        block, offset = divmod(self._pos, self._entry.block_bytes)
        if self._s3 is None and offset == 0:
            # The rest from a block's start (a small object's read(), a large one's last read): one pread,
            # checked, returned as it is.
            data = os.pread(self._entry.fd, self._size - self._pos, self._pos)
            try:
                if len(data) != self._size - self._pos:
                    raise CorruptEntry("shorter than its size")
                self._entry.check_blocks(block, memoryview(data))
            except CorruptEntry:
                self._leave_entry()
            else:
                self._pos = self._size
                return data
        if self._s3 is not None:
            return self._s3.readall()
        rest = bytearray(max(0, self._size - self._pos))
        view, got = memoryview(rest), 0
        while got < len(rest):
            done = self.readinto(view[got:])
            if not done:
                break
            got += done
        return bytes(view[:got])

    def read_chunk(self) -> Optional[bytes]:
        chunk = self.read(_CHUNK_BYTES)
        return chunk or None

    def close(self) -> None:
        if not self.closed:
            self._entry.close()
            if self._s3 is not None:
                self._s3.close()
        super().close()

    def _read_checked(self, view: memoryview) -> int:
        """Reads checked bytes at the position into ``view`` (not past the object's end); raises
        CorruptEntry, with nothing returned, if a block they come from is damaged."""
        entry = self._entry
        index, offset = divmod(self._pos, entry.block_bytes)
        if offset == 0 and index != self._block_index:
            # Whole blocks, straight into the caller's buffer: the last one may end with the object.
            if self._pos + len(view) == self._size:
                span = len(view)  # to the object's end, whose last block may be short
            else:
                span = len(view) // entry.block_bytes * entry.block_bytes
            if span:
                if os.preadv(entry.fd, [view[:span]], self._pos) != span:
                    raise CorruptEntry("shorter than its size")
                entry.check_blocks(index, view[:span])
                return span
        if index != self._block_index:
            start = index * entry.block_bytes
            length = min(entry.block_bytes, self._size - start)
            if len(self._block) < length:
                self._block = bytearray(min(entry.block_bytes, self._size))
            block = memoryview(self._block)[:length]
            self._block_index = -1
            if os.preadv(entry.fd, [block], start) != length:
                raise CorruptEntry("shorter than its size")
            entry.check_blocks(index, block)
            self._block_index = index
        start = index * entry.block_bytes
        end = min(start + entry.block_bytes, self._size)
        count = min(len(view), end - self._pos)
        view[:count] = memoryview(self._block)[offset : offset + count]
        return count

    def _leave_entry(self) -> None:
        """A damaged entry: the policy drops it and the rest comes from S3, from this position on."""
        self._s3 = self._refetch(self._pos)
        self._entry.close()
        self._block = bytearray()

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed file.")

    def __repr__(self) -> str:
        return f"<torchdata_s3 CachedObjectReader {self.name}>"
