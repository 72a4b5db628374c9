"""Random-access file objects over S3 objects: what the loader yields and :meth:`S3Client.open` returns.

A stream is an :class:`io.BufferedReader` (so ``readline``, iteration and small reads run in C) over
:class:`ObjectReader`, a raw reader that decides where each byte comes from. The native core only moves
bytes (GETs, retained chunks, copies into the caller's buffer with the GIL released); every decision about
positions, what to keep and when to fetch again is made here.

Where the bytes for a read at position ``p`` come from, in order:

1. The current GET, when ``p`` is where it stands: the common, sequential case, one copy into the caller's
   buffer.
2. Bytes the current GET already delivered and still holds: an object up to ``retain_bytes`` is held whole
   once read (any seek, any number of times, one GET); a larger one holds the last part it read.
3. Further along the current GET: a forward seek skips ahead when the bytes are already (or nearly) there,
   or, for an object held whole, always.
4. A new ranged GET at ``p``, with ``If-Match`` of the ETag the stream started with, so versions never mix.
   A read away from what is held fetches what it asks for, at least ``RANDOM_READ_BYTES``; reads that go on
   from there double the next range, and from ``SCAN_AFTER_BYTES`` on ask for the rest of the object in
   parallel parts, so a zip member or a
   Parquet column costs about its own bytes while a sequential scan still reaches full speed.

The object's size comes from the listing or the first response; ``seek(n, 2)`` before anything was fetched
asks for just the object's tail (``Range: bytes=-n``), which is what zip and Parquet readers do first.
"""

from __future__ import annotations

import contextlib
import io
from typing import TYPE_CHECKING, Any, Optional, Union

from . import _core
from .errors import S3Error
from .url import S3Url

if TYPE_CHECKING:
    from .client import S3Client

__all__ = ["RANDOM_READ_BYTES", "ObjectReader", "S3ObjectStream"]

MiB = 1024 * 1024
# The smallest ranged GET for a read away from what is held: a round trip costs far more than a megabyte
# on any link, and it covers the headers and footers random-access formats read in small pieces.
RANDOM_READ_BYTES = 1 * MiB
# Ranged GETs that follow one another double in length; from this length on, the next one asks for the rest
# of the object, which then arrives in parallel parts at full speed.
SCAN_AFTER_BYTES = 8 * MiB
# The C buffer under readline(), iteration and small reads: large enough that refills (one Python call
# each) are rare, small enough to stay out of the way of large reads, which bypass it.
BUFFER_BYTES = 1 * MiB
_MIN_BUFFER_BYTES = 8 * 1024
# http_status of a range that starts past the end of the object.
_RANGE_NOT_SATISFIABLE = 416


class ObjectReader(io.RawIOBase):
    """The raw, seekable reader of one S3 object (see the module docstring for the policy).

    Args:
        client: the :class:`~torchdata_s3.S3Client` to fetch with (its config sets part size, windows and
            ``retain_bytes``).
        location: the object.
        stream: a GET of the whole object already started (the loader's), or None to fetch on first read.
        size: the object's size if known (a listing, or the stream's headers), else None.
        window_bytes: how far a sequential read may run ahead [config.read_window_bytes].
    """

    def __init__(
        self,
        client: S3Client,
        location: S3Url,
        *,
        stream: Optional[_core.ObjectStream] = None,
        size: Optional[int] = None,
        window_bytes: Optional[int] = None,
    ) -> None:
        super().__init__()
        config = client.config
        self._client = client
        self._location = location
        self.name = f"s3://{location.bucket}/{location.key}"
        self._part = config.part_size_bytes
        self._window = window_bytes or config.read_window_bytes
        self._retain = config.retain_bytes
        self._size = size
        self._etag = ""
        self._pos = 0
        self._source: Optional[_core.ObjectStream] = None
        self._source_first = 0  # object offset of the source's first byte
        self._source_done = False  # the source delivered all it will
        self._source_suffix = False  # the source asked for the object's tail (its first offset comes later)
        self._source_end: Optional[int] = None  # the object offset where a bounded range ends (exclusive)
        self._widened = False  # the source's window was opened to read_window_bytes
        self._next_range = RANDOM_READ_BYTES  # the next ranged GET's length when reads go on sequentially
        self._fetched_before = 0  # bytes received by sources already closed
        if stream is not None:
            self._adopt(stream, first=0, widened=False)

    # -- what the policy knows ----------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """The object's size in bytes (waits for the first response if it is not known yet)."""
        return self._known_size()

    @property
    def etag(self) -> str:
        """The ETag of the version being read ("" until the first response)."""
        if not self._etag and self._source is not None:
            self._learn_placement()
        return self._etag

    @property
    def bytes_fetched(self) -> int:
        """Bytes received from S3 for this stream so far, over all its GETs."""
        current = self._source.received_bytes if self._source is not None else 0
        return self._fetched_before + current

    # -- io.RawIOBase -------------------------------------------------------------------------------------

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        self._check_open()
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._check_open()
        if whence == io.SEEK_SET:
            target = offset
        elif whence == io.SEEK_CUR:
            target = self._pos + offset
        elif whence == io.SEEK_END:
            target = self._known_size(tail_hint=-offset) + offset
        else:
            raise ValueError(f"invalid whence ({whence}, should be 0, 1 or 2)")
        if target < 0:
            # As io.BytesIO, which the original loader yielded: refused from the start, clamped otherwise.
            if whence == io.SEEK_SET:
                raise ValueError(f"negative seek value {target}")
            target = 0
        self._pos = target
        return target

    def readinto(self, buffer: Any) -> int:
        self._check_open()
        view = memoryview(buffer).cast("B")
        if not view:
            return 0
        while True:
            if self._size is not None and self._pos >= self._size:
                return 0
            got = self._read_held(view)
            if not got:
                source = self._sequential_source(len(view))
                if source is None:
                    return 0
                got = source.readinto(view)
                if not got:
                    self._source_done = True
                    continue
            self._pos += got
            return got

    def readall(self) -> bytes:
        self._check_open()
        parts: list[bytes] = []
        while self._size is None or self._pos < self._size:
            if self._read_held_is_possible():
                # Bytes held before the source's position: copy them out first.
                held = bytearray(self._remaining_or(RANDOM_READ_BYTES))
                got = self.readinto(held)
                parts.append(bytes(memoryview(held)[:got]))
                continue
            source = self._sequential_source(self._remaining_or(RANDOM_READ_BYTES))
            if source is None:
                break
            data = source.read(-1)  # the rest of this GET, allocated once, copied once, GIL released
            if not data:
                self._source_done = True
                continue
            self._pos += len(data)
            parts.append(data)
        if len(parts) == 1:
            return parts[0]
        return b"".join(parts)

    def read_chunk(self) -> Optional[Union[_core.Buffer, bytes]]:
        """The next block of the object without copying it (a buffer-protocol object), or None at the end."""
        self._check_open()
        while self._size is None or self._pos < self._size:
            if self._read_held_is_possible():
                held = bytearray(self._part)
                got = self.readinto(held)
                return bytes(memoryview(held)[:got])
            source = self._sequential_source(self._part)
            if source is None:
                return None
            chunk = source.read_chunk()
            if chunk is None:
                self._source_done = True
                continue
            self._pos += len(chunk)
            return chunk
        return None

    def close(self) -> None:
        if not self.closed:
            self._drop_source()
        super().close()

    def __repr__(self) -> str:
        return f"<torchdata_s3 ObjectReader {self.name}>"

    # -- policy -------------------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed file.")

    def _remaining_or(self, default: int) -> int:
        return max(1, self._size - self._pos) if self._size is not None else default

    def _held_whole(self) -> bool:
        """Whether this object is small enough to be kept whole once read."""
        return self._size is None or self._size <= self._retain

    def _retention(self) -> int:
        if self._size is not None and self._size <= self._retain:
            return max(1, self._size)
        if self._size is None:
            return self._retain  # until the size is known; trimmed when it is
        return self._part

    def _adopt(self, stream: _core.ObjectStream, *, first: int, widened: bool, suffix: bool = False) -> None:
        self._drop_source()
        self._source = stream
        self._source_suffix = suffix
        self._source_end = None
        self._source_first = first
        self._source_done = False
        self._widened = widened
        stream.retain(self._retention())

    def _drop_source(self) -> None:
        source, self._source = self._source, None
        if source is not None:
            # RuntimeError: opened in another process before fork(); nothing of it was fetched here.
            with contextlib.suppress(RuntimeError):
                self._fetched_before += source.received_bytes
            source.close()

    def _learn_placement(self) -> bool:
        """Waits for the current source's headers: where it starts, the object's size and ETag. False (and
        no source) when the range it asked for starts past the end of the object."""
        assert self._source is not None
        try:
            first, size = self._source.placement()
        except S3Error as error:
            if error.http_status != _RANGE_NOT_SATISFIABLE:
                raise
            # Only a range asked for without knowing the size can miss the object; a suffix misses only an
            # empty one.
            suffix = self._source_suffix
            self._drop_source()
            if suffix:
                self._size = 0
            return False
        self._source_first = first
        if self._source_suffix:
            self._source_end = size
        if self._size != size:
            self._size = size
            self._source.retain(self._retention())
        if not self._etag:
            self._etag = self._source.etag
        return True

    def _known_size(self, tail_hint: int = 0) -> int:
        while self._size is None:
            if self._source is None:
                # Nothing fetched yet and the end is wanted: ask for the tail alone (the CRT learns the size
                # with a HEAD first), which is what a zip or Parquet reader reads next.
                suffix = max(RANDOM_READ_BYTES, tail_hint)
                stream = self._open(suffix_bytes=suffix, window_bytes=min(suffix, self._window))
                self._adopt(stream, first=0, widened=True, suffix=True)
                self._next_range = 2 * suffix
            self._learn_placement()
        return self._size

    def _read_held_is_possible(self) -> bool:
        source = self._source
        if source is None:
            return False
        offset = self._pos - self._source_first
        return source.held_start <= offset < source.tell()

    def _read_held(self, view: memoryview) -> int:
        """Copies bytes at the position from what the current source holds; 0 if they are not there."""
        source = self._source
        if source is None:
            return 0
        offset = self._pos - self._source_first
        if offset < 0 or offset >= source.tell():
            return 0
        return source.read_held(offset, view)

    def _sequential_source(self, wanted: int) -> Optional[_core.ObjectStream]:
        """A source whose next byte is the one at the position (skipping or fetching as the policy says), or
        None when the position is at or past the end of the object."""
        source = self._source
        if source is not None and not self._source_done:
            if (not self._etag or self._size is None) and not self._learn_placement():
                return self._fetch_from(self._pos, wanted)
            if self._pos >= self._size:  # type: ignore[operator]
                # Nothing to read. (An empty object's GET can still fail with 416 after its headers came:
                # seen against moto. It is never read from.)
                return None
            offset = self._pos - self._source_first
            consumed = source.tell()
            if offset > consumed and self._may_skip(source, offset - consumed):
                if source.skip(offset - consumed) < offset - consumed:
                    self._source_done = True
                consumed = source.tell()
            if offset == consumed and not self._source_done:
                if not self._widened:
                    source.widen_window(self._window)
                    self._widened = True
                return source
        return self._fetch_from(self._pos, wanted)

    def _may_skip(self, source: _core.ObjectStream, distance: int) -> bool:
        """Whether to reach a position further along the source by reading through it (else: a new GET):
        when the object is held whole anyway, when the source's range was asked for up to there, or when the
        bytes are (about to be) fetched already: received, or within the window granted to a scan."""
        if self._held_whole() or (self._source_end is not None and self._pos < self._source_end):
            return True
        in_flight = self._window if self._widened else 0
        return distance <= max(source.buffered_bytes, in_flight) + self._part

    def _fetch_from(self, position: int, wanted: int) -> Optional[_core.ObjectStream]:
        if self._size is not None and position >= self._size:
            return None
        continuing = self._source is not None and self._source_done
        continuing = continuing and position == self._source_first + self._source.tell()  # type: ignore[union-attr]
        if self._source is None and position == 0 and self._size is None:
            # The first read of an object fetched lazily, from its start: the whole object, as a scan.
            self._adopt(self._open(window_bytes=self._part), first=0, widened=False)
            return self._sequential_source(wanted)
        if self._size is not None and self._size <= self._retain and not continuing:
            # Small enough to keep whole: fetch all of it once, and reach the position by reading through.
            self._adopt(self._open(window_bytes=min(self._size, self._window) or 1), first=0, widened=True)
            return self._sequential_source(wanted)
        if continuing:
            length = self._next_range
            if length >= max(2 * self._part, SCAN_AFTER_BYTES):
                # Reads went on long enough to be a scan: the rest, in parallel parts, within the window.
                length = max(length, self._remaining_from(position))
        else:
            length = max(wanted, RANDOM_READ_BYTES)
        self._next_range = 2 * length
        last = position + length - 1
        if self._size is not None:
            last = min(last, self._size - 1)
        stream = self._open(byte_range=(position, last), window_bytes=min(last - position + 1, self._window))
        self._adopt(stream, first=position, widened=True)
        self._source_end = last + 1
        if not self._learn_placement():
            return None  # past the end of an object whose size was not known yet
        return self._source

    def _remaining_from(self, position: int) -> int:
        return self._size - position if self._size is not None else 0

    def _open(self, **request: Any) -> _core.ObjectStream:
        return self._client.open_native(self._location, if_match=self._etag, **request)


class S3ObjectStream(io.BufferedReader):
    """A seekable, readable binary file object over one S3 object (what the loader yields).

    Reads, ``readline``, iteration, ``seek``/``tell`` from any position, as many times as you like; see
    :mod:`torchdata_s3.reader` for where the bytes come from and what is kept in memory. Also:

    - ``read_chunk()``: the next block without copying (a buffer-protocol object), or None at the end.
    - ``size``, ``etag``, ``bytes_fetched``, ``name`` (the ``s3://`` URL).
    """

    raw: ObjectReader

    def __init__(self, raw: ObjectReader, buffer_size: Optional[int] = None) -> None:
        if buffer_size is None:
            known = raw._size
            buffer_size = BUFFER_BYTES if known is None else max(_MIN_BUFFER_BYTES, min(known, BUFFER_BYTES))
        super().__init__(raw, buffer_size)

    @property
    def size(self) -> int:
        """The object's size in bytes."""
        return self.raw.size

    @property
    def etag(self) -> str:
        return self.raw.etag

    @property
    def bytes_fetched(self) -> int:
        """Bytes received from S3 for this stream so far."""
        return self.raw.bytes_fetched

    def read_chunk(self) -> Optional[Union[_core.Buffer, bytes]]:
        """The next block of the object (no copy when nothing of it is buffered here), or None at the end."""
        buffered = self.raw.tell() - self.tell()
        if buffered:
            return self.read(buffered)
        chunk = self.raw.read_chunk()
        # BufferedReader caches the raw position for its seek fast path: let it see the raw reader moved.
        self.tell()
        return chunk

    def __repr__(self) -> str:
        return f"<torchdata_s3 S3ObjectStream {self.raw.name}>"
