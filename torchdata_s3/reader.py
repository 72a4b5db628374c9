"""Random-access file objects over S3 objects: what the loader yields and :meth:`S3Client.open` returns.

A stream is an :class:`io.BufferedReader` (so ``readline``, iteration and small reads run in C) over
:class:`ObjectReader`, a raw reader that decides where each byte comes from. The native core only moves
bytes (GETs, retained chunks, copies into the caller's buffer with the GIL released); every decision about
positions, what to keep and when to fetch again is made here.

Where the bytes for a read at position ``p`` come from, in order:

1. The current GET, when ``p`` is where it stands: the common, sequential case, one copy into the caller's
   buffer; none for ``read(n)`` in pieces of a size the download was received into (``read_in_order``,
   csrc/scattered_results.h).
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

import functools
import io
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar, Union, cast

from . import _core
from .errors import S3Error
from .landed import refuse_pickling
from .url import S3Url

if TYPE_CHECKING:
    from .client import S3Client

__all__ = ["KEPT_SMALL_SOURCES", "RANDOM_READ_BYTES", "ObjectReader", "S3ObjectStream"]

MiB = 1024 * 1024
# The smallest ranged GET for a read away from what is held: a round trip costs far more than a megabyte
# on any link, and it covers the headers and footers random-access formats read in small pieces.
RANDOM_READ_BYTES = 1 * MiB
# Ranged GETs that follow one another double in length; from this length on, the next one asks for the rest
# of the object, which then arrives in parallel parts at full speed.
SCAN_AFTER_BYTES = 8 * MiB
# Of an object larger than retain_bytes, how many small GETs (a tail, a header; at most about two parts of
# memory each) stay open beside the current one, for readers that go back and forth between a few places.
KEPT_SMALL_SOURCES = 4
# The C buffer under readline(), iteration and small reads: large enough that refills (one Python call
# each) are rare, small enough to stay out of the way of large reads, which bypass it.
BUFFER_BYTES = 1 * MiB
_MIN_BUFFER_BYTES = 8 * 1024
# http_status of a range that starts past the end of the object.
_RANGE_NOT_SATISFIABLE = 416


def seek_target(offset: int, whence: int, position: int, end: Callable[[], int]) -> int:
    """The position ``seek(offset, whence)`` moves to, as in io.BytesIO (what the original loader yielded):
    a negative absolute position is refused, a negative relative one clamps to 0. ``end()`` gives the
    object's size, asked for only when seeking from the end."""
    if whence == io.SEEK_SET:
        target = offset
    elif whence == io.SEEK_CUR:
        target = position + offset
    elif whence == io.SEEK_END:
        target = end() + offset
    else:
        raise ValueError(f"invalid whence ({whence}, should be 0, 1 or 2)")
    if target < 0:
        if whence == io.SEEK_SET:
            raise ValueError(f"negative seek value {target}")
        target = 0
    return target


class _Source:
    """One GET of (part of) the object, and where it stands."""

    __slots__ = ("done", "end", "first", "stream", "suffix", "widened")

    def __init__(self, stream: _core.ObjectStream, first: int, *, end: Optional[int], widened: bool) -> None:
        self.stream = stream
        self.first = first  # object offset of its first byte (of a suffix: known once its headers came)
        self.end = end  # object offset where the range it asked for ends (exclusive); None: the object's end
        self.done = False  # it delivered all it will
        self.widened = widened  # its window is as wide as a scan's
        self.suffix = False  # it asked for the object's tail

    @property
    def position(self) -> int:
        """The object offset of its next byte."""
        return self.first + self.stream.tell()

    def holds(self, position: int) -> bool:
        offset = position - self.first
        return 0 <= offset < self.stream.tell() and offset >= self.stream.held_start


Method = TypeVar("Method", bound=Callable[..., Any])


def _remembers_failure(method: Method) -> Method:
    """Wraps a method of :class:`ObjectReader` that may send a request (a read, a seek from the end) so that
    an S3Error it raises is also kept as ``failure``."""

    @functools.wraps(method)
    def remembering(self: ObjectReader, *arguments: Any, **keywords: Any) -> Any:
        try:
            return method(self, *arguments, **keywords)
        except S3Error as error:
            self._failure = error
            raise

    return cast(Method, remembering)


class ObjectReader(io.RawIOBase):
    """The raw, seekable reader of one S3 object (see the module docstring for the policy).

    Args:
        client: the :class:`~torchdata_s3.S3Client` to fetch with (its config sets part size, windows and
            ``retain_bytes``).
        location: the object.
        stream: a GET of the whole object already started (the loader's), or None to fetch on first read.
        size: the object's size if known (a listing, or the stream's headers), else None.
        window_bytes: how far a sequential read may run ahead [config.read_window_bytes].
        etag: the version to read, if known: every GET asks for it with ``If-Match`` [""].
    """

    def __init__(
        self,
        client: S3Client,
        location: S3Url,
        *,
        stream: Optional[_core.ObjectStream] = None,
        size: Optional[int] = None,
        window_bytes: Optional[int] = None,
        etag: str = "",
    ) -> None:
        super().__init__()
        config = client.config
        self._client = client
        self.location = location
        self.name = f"s3://{location.bucket}/{location.key}"
        self._part = config.part_size_bytes
        self._window = window_bytes or config.read_window_bytes
        self._retain = config.retain_bytes
        self._size = size
        self._etag = etag
        self._pos = 0
        self._source: Optional[_Source] = None  # the GET read last
        self._kept: list[_Source] = []  # earlier GETs of an object held whole, for the bytes they hold
        self._next_range = RANDOM_READ_BYTES  # the next ranged GET's length when reads go on in order
        # Where the caller's current read ends (0: unknown). BufferedReader serves a large read() with raw
        # reads of whole buffers and one buffer fill; a GET sized by the whole read fetches it in one go, and
        # no more (a Parquet column chunk of 1.25 MiB cost 3 MiB as a 1 MiB read and a doubled 2 MiB one).
        self._read_end = 0
        self._fetched_before = 0  # bytes received by GETs already closed
        self._failure: Optional[S3Error] = None
        # The GET `for line in stream` cuts lines from natively (line_stream()), while attached: the position
        # is then its source's, settled into _pos by every other call (_settle_lines).
        self._lines: Optional[_Source] = None
        if stream is not None:
            self._adopt(_Source(stream, 0, end=None, widened=False))

    # -- what the policy knows ----------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """The object's size in bytes (waits for the first response if it is not known yet)."""
        return self._known_size()

    @property
    def size_if_known(self) -> Optional[int]:
        """The object's size, or None while no response or listing told it."""
        return self._size

    @property
    def window_bytes(self) -> int:
        """How far a sequential read may run ahead of the reader."""
        return self._window

    @property
    def etag(self) -> str:
        """The ETag of the version being read ("" until the first response)."""
        if not self._etag and self._source is not None:
            self._learn_placement()
        return self._etag

    @property
    def failure(self) -> Optional[S3Error]:
        """The S3Error the last failed read (or seek from the end) raised, or None.

        A C or C++ caller (torch's zip reader) may swallow it or call back in with it still set, which CPython
        then reports as an unrelated error; the caller's wrapper can raise this one instead.
        """
        return self._failure

    @property
    def bytes_fetched(self) -> int:
        """Bytes received from S3 for this stream so far, over all its GETs."""
        return self._fetched_before + sum(source.stream.received_bytes for source in self._sources())

    # -- io.RawIOBase -------------------------------------------------------------------------------------

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        self._check_open()
        if self._lines is not None:
            self._settle_lines(detach=False)
        return self._pos

    @_remembers_failure
    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._check_open()
        self._settle_lines()
        self._pos = seek_target(offset, whence, self._pos, lambda: self._known_size(tail_hint=-offset))
        return self._pos

    def expect_read(self, end: int) -> None:
        """Tells the policy that the caller's read goes on to ``end`` (0: forget it); see ``_read_end``."""
        self._read_end = end

    @_remembers_failure
    def readinto(self, buffer: Any) -> int:
        self._check_open()
        self._settle_lines()
        view = memoryview(buffer).cast("B")
        if not view:
            return 0
        while True:
            if self._size is not None and self._pos >= self._size:
                return 0
            got = self._read_held(view)
            if not got:
                source = self._sequential_source(max(len(view), self._read_end - self._pos))
                if source is None:
                    return 0
                got = source.stream.readinto(view)
                if not got:
                    source.done = True
                    continue
            self._pos += got
            return got

    @_remembers_failure
    def read_in_order(self, size: int) -> Optional[bytes]:
        """``read(size)`` at the position from the GET read in order, once it is being read, without a buffer
        in between: the result the download was received straight into (no copy), or else, for a read that
        ends before the object does and within what the GET asked for, one copy into a result of its own (a
        kept one when one fits, kept_results.h: an object's first part, asked for before its size was known,
        is in pool buffers, and BufferedReader would copy it into fresh memory each time). None and nothing
        read otherwise."""
        self._check_open()
        self._settle_lines()
        source = self._source
        if source is None or source.done or not source.widened or source.position != self._pos:
            return None
        data = source.stream.take_landed(size)
        if data is None:
            end = self._pos + size
            if self._size is None or end >= self._size or (source.end is not None and source.end < end):
                return None  # the rest of the object (one read of it elsewhere), or past what this GET asked
            data = source.stream.read(size)
        self._pos += len(data)
        return data

    @_remembers_failure
    def readall(self) -> bytes:
        self._check_open()
        self._settle_lines()
        parts: list[bytes] = []
        while self._size is None or self._pos < self._size:
            if self._holder() is not None:
                # Bytes already held: copy them out first.
                held = bytearray(self._remaining_or(RANDOM_READ_BYTES))
                got = self.readinto(held)
                parts.append(bytes(memoryview(held)[:got]))
                continue
            source = self._sequential_source(self._remaining_or(RANDOM_READ_BYTES))
            if source is None:
                break
            data = source.stream.read(-1)  # the rest of this GET, allocated once, copied once, GIL released
            if not data:
                source.done = True
                continue
            self._pos += len(data)
            parts.append(data)
        if len(parts) == 1:
            return parts[0]
        return b"".join(parts)

    @_remembers_failure
    def read_chunk(self) -> Optional[Union[_core.Buffer, bytes]]:
        """The next block of the object without copying it (a buffer-protocol object), or None at the end."""
        self._check_open()
        self._settle_lines()
        while self._size is None or self._pos < self._size:
            if self._holder() is not None:
                held = bytearray(self._part)
                got = self.readinto(held)
                return bytes(memoryview(held)[:got])
            source = self._sequential_source(self._part)
            if source is None:
                return None
            chunk = source.stream.read_chunk()
            if chunk is None:
                source.done = True
                continue
            self._pos += len(chunk)
            return chunk
        return None

    # BufferedReader asks its raw reader `closed` on every readline, so once per line of `for line in stream`,
    # and IOBase's property looks up a second attribute each time. A class attribute, shadowed by the
    # instance's once closed, answers in half the time (in memory, lines of 256 bytes: 171 -> 148 ns each).
    closed = False

    @_remembers_failure
    def line_stream(self, wanted: int) -> Optional[_core.ObjectStream]:
        """The GET to cut lines from natively (``_core.lines``) from the position on, attached until any
        other call on this reader detaches it; None when lines are better read through the reader: bytes held
        from an earlier GET, or nothing left. ``wanted``: how much to fetch if a new GET is needed."""
        self._check_open()
        self._settle_lines()
        if (self._size is not None and self._pos >= self._size) or self._holder() is not None:
            return None
        source = self._sequential_source(wanted)
        if source is None:
            return None
        source.stream.attach_lines()
        self._lines = source
        return source.stream

    def close(self) -> None:
        if not self.closed:
            self._settle_lines()
            for source in self._sources():
                self._close(source)
            self._source, self._kept = None, []
        super().close()
        self.closed = True

    def __repr__(self) -> str:
        return f"<torchdata_s3 ObjectReader {self.name}>"

    # -- policy -------------------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed file.")

    def _settle_lines(self, *, detach: bool = True) -> None:
        """Moves the position past the lines cut natively from `_lines` (see line_stream); with `detach`, no
        more are: the reader reads on by itself."""
        source = self._lines
        if source is None:
            return
        self._pos = source.position
        if detach:
            self._lines = None
            source.stream.detach_lines()

    def _sources(self) -> list[_Source]:
        return ([self._source] if self._source is not None else []) + self._kept

    def _remaining_or(self, default: int) -> int:
        return max(1, self._size - self._pos) if self._size is not None else default

    def _held_whole(self) -> bool:
        """Whether this object is small enough to keep whatever of it was fetched (unknown: assume so)."""
        return self._size is None or self._size <= self._retain

    def _retention(self) -> int:
        if self._size is not None and self._size <= self._retain:
            return max(1, self._size)
        if self._size is None:
            return self._retain  # until the size is known; trimmed when it is
        return self._part

    def _adopt(self, source: _Source) -> None:
        """Makes `source` the one read. The previous one is kept for its bytes if the object is held whole;
        of a larger object, if it is small (see `_is_small`), up to KEPT_SMALL_SOURCES of them."""
        previous = self._source
        if previous is not None:
            if self._held_whole():
                self._kept.append(previous)
            elif self._is_small(previous):
                self._kept.append(previous)
                while len(self._kept) > KEPT_SMALL_SOURCES:
                    self._close(self._kept.pop(0))
            else:
                self._close(previous)
        self._source = source
        retention = self._retention()
        if source.end is not None and self._is_small(source):
            # All of a small range, so that a reader coming back finds any of its bytes.
            retention = max(retention, source.end - source.first)
        source.stream.retain(retention)

    def _is_small(self, source: _Source) -> bool:
        """A GET that can hold and fetch at most about two parts: a ranged GET of up to a part or
        RANDOM_READ_BYTES (a tail, a header), or one never widened into a scan. Keeping a few costs little
        memory and saves a round trip each time a reader goes back to them: torch.load reads records at the
        object's start and end in turn before it reads the tensors in order."""
        if source.end is not None:
            return source.end - source.first <= max(self._part, RANDOM_READ_BYTES)
        return not source.widened

    def _close(self, source: _Source) -> None:
        # Not contextlib.suppress: a context manager per close cost a microsecond, once per object loaded.
        try:  # noqa: SIM105
            self._fetched_before += source.stream.received_bytes
        except RuntimeError:
            pass  # opened in another process before fork(); nothing of it was fetched here
        source.stream.close()

    def _is_empty(self) -> bool:
        return self._client.head(self.name).size == 0

    def _learn_placement(self) -> bool:
        """Waits for the current source's headers: where it starts, the object's size and ETag. False (and
        no current source) when the range it asked for starts past the end of the object."""
        source = self._source
        assert source is not None
        try:
            first, size = source.stream.placement()
        except S3Error as error:
            # Some S3-compatible servers (moto among them) answer a suffix range of an empty object with the
            # (empty) object and no Content-Range, which the CRT refuses: a HEAD tells that case apart.
            unranged = source.suffix and error.crt_error == "AWS_ERROR_S3_MISSING_CONTENT_RANGE_HEADER"
            if error.http_status != _RANGE_NOT_SATISFIABLE and not (unranged and self._is_empty()):
                raise
            # Only a range asked for without knowing the size can miss the object; a suffix misses only an
            # empty one.
            self._source = None
            self._close(source)
            if source.suffix:
                self._size = 0
            return False
        source.first = first
        if source.suffix:
            source.end = size
        if self._size != size:
            self._size = size
            for held in self._sources():
                held.stream.retain(self._retention())
            if not self._held_whole():
                for kept in self._kept:
                    self._close(kept)
                self._kept = []
        if not self._etag:
            self._etag = source.stream.etag
        return True

    def _known_size(self, tail_hint: int = 0) -> int:
        while self._size is None:
            if self._source is None:
                # Nothing fetched yet and the end is wanted: ask for the tail alone (the CRT learns the size
                # with a HEAD first), which is what a zip or Parquet reader reads next.
                suffix = max(RANDOM_READ_BYTES, tail_hint)
                stream = self._open(suffix_bytes=suffix, window_bytes=min(suffix, self._window))
                source = _Source(stream, 0, end=None, widened=True)
                source.suffix = True
                self._adopt(source)
                self._next_range = 2 * suffix
            self._learn_placement()
        return self._size

    def _holder(self) -> Optional[_Source]:
        """A source holding the byte at the position, made the current one; None if none does."""
        for source in self._sources():
            if source.holds(self._pos):
                if source is not self._source:
                    self._kept.remove(source)
                    self._adopt(source)
                return source
        return None

    def _read_held(self, view: memoryview) -> int:
        """Copies bytes at the position from what a source holds; 0 if no source holds them."""
        source = self._holder()
        if source is None:
            return 0
        return source.stream.read_held(self._pos - source.first, view)

    def _sequential_source(self, wanted: int) -> Optional[_Source]:
        """A source whose next byte is the one at the position (reading through to it, or fetching, as the
        policy says), or None when the position is at or past the end of the object."""
        source = self._source
        if source is not None and not source.done:
            if (not self._etag or self._size is None) and not self._learn_placement():
                return self._fetch_from(self._pos, wanted)
            if self._pos >= self._size:  # type: ignore[operator]
                # Nothing to read. (An empty object's GET can still fail with 416 after its headers came:
                # seen against moto. It is never read from.)
                return None
        for candidate in self._sources():
            if candidate.done or candidate.first > self._pos:
                continue
            distance = self._pos - candidate.position
            if distance == 0 or (distance > 0 and self._may_skip(candidate, distance)):
                if candidate is not self._source:
                    self._kept.remove(candidate)
                    self._adopt(candidate)
                if distance and candidate.stream.skip(distance) < distance:
                    candidate.done = True
                    continue
                if not candidate.widened:
                    candidate.stream.widen_window(self._window)
                    candidate.widened = True
                return candidate
        return self._fetch_from(self._pos, wanted)

    def _may_skip(self, source: _Source, distance: int) -> bool:
        """Whether to reach a position further along a source by reading through it (else: a new GET): when
        its range was asked for up to there, or when the bytes are (about to be) fetched already: received,
        or within the window granted to a scan."""
        if source.end is not None and self._pos < source.end:
            return True
        in_flight = self._window if source.widened else 0
        return distance <= max(source.stream.buffered_bytes, in_flight) + self._part

    def _fetch_from(self, position: int, wanted: int) -> Optional[_Source]:
        if self._size is not None and position >= self._size:
            return None
        previous = self._source
        continuing = previous is not None and previous.done and position == previous.position
        if previous is None and not self._kept and position == 0 and self._size is None:
            # The first read of an object fetched lazily, from its start: the whole object, as a scan.
            self._adopt(_Source(self._open(window_bytes=self._part), 0, end=None, widened=False))
            return self._sequential_source(wanted)
        if continuing:
            # A read that asks for more than the doubled range gets all it asks for in one GET (parallel
            # parts), rather than a round trip per doubling: torch.load reads each tensor in one call.
            length = max(self._next_range, wanted)
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
        self._adopt(_Source(stream, position, end=last + 1, widened=True))
        if not self._learn_placement():
            return None  # past the end of an object whose size was not known yet
        return self._source

    def _remaining_from(self, position: int) -> int:
        return self._size - position if self._size is not None else 0

    def _open(self, **request: Any) -> _core.ObjectStream:
        return self._client.open_native(self.location, if_match=self._etag, **request)


class S3ObjectStream(io.BufferedReader):
    """A seekable, readable binary file object over one S3 object (what the loader yields).

    Reads, ``readline``, iteration, ``seek``/``tell`` from any position, as many times as you like; see
    :mod:`torchdata_s3.reader` for where the bytes come from and what is kept in memory. Also:

    - ``read_chunk()``: the next block without copying (a buffer-protocol object), or None at the end.
    - ``size``, ``etag``, ``bytes_fetched``; ``url`` (also ``name``: ``s3://bucket/key``), ``bucket``,
      ``key``.
    """

    raw: ObjectReader

    def __init__(self, raw: ObjectReader, buffer_size: Optional[int] = None) -> None:
        if buffer_size is None:
            # Never more than the object, nor more than its read window: the buffer is read ahead too.
            limit = min(BUFFER_BYTES, raw.window_bytes)
            known = raw.size_if_known
            buffer_size = max(_MIN_BUFFER_BYTES, limit if known is None else min(known, limit))
        super().__init__(raw, buffer_size)
        self._buffer_bytes = buffer_size

    @property
    def size(self) -> int:
        """The object's size in bytes."""
        return self.raw.size

    @property
    def url(self) -> str:
        """``s3://bucket/key`` of the object."""
        return self.raw.name

    @property
    def bucket(self) -> str:
        return self.raw.location.bucket

    @property
    def key(self) -> str:
        return self.raw.location.key

    def read(self, size: Optional[int] = -1) -> bytes:
        """Up to ``size`` bytes (all that is left if ``size`` is negative or None)."""
        known = self.raw.size_if_known
        position = self.tell()
        if known is not None and position >= known:
            # At the end (the read loop's last call, once per object): nothing to look for.
            return b""
        if size is not None and size >= _core.MIN_SCATTERED_READ_BYTES and self.raw.tell() == position:
            # Nothing buffered here: the download may have been received straight into this read's result, or
            # else is copied once into one (kept_results.h: not fresh memory each time).
            landed = self.raw.read_in_order(size)
            if landed is not None:
                self.tell()  # BufferedReader caches the raw position for its seek fast path: show it moved
                return landed
            # Nothing was read (nor learnt of the size): `known` and `position` still hold.
        if size is not None and size >= 0 and (known is None or size < known - position):
            if size <= self._buffer_bytes:
                return super().read(size)  # one raw read at most, as large as the buffer or larger
            self.raw.expect_read(position + size)
            try:
                return super().read(size)
            finally:
                self.raw.expect_read(0)
        # The rest of the object: one result of its exact size, filled by one native read. (BufferedReader
        # would allocate `size` bytes, 1 MiB for the common read loop, and shrink the result: per small
        # object that cost a third of the loader's throughput.)
        return super().read()

    def readinto(self, buffer: Any) -> int:
        """Fills ``buffer`` from the position; the count of bytes written, 0 at the end."""
        view = memoryview(buffer)
        position = self.tell()
        raw = self.raw
        if view.nbytes < _core.MIN_SCATTERED_READ_BYTES or view.readonly or raw.tell() != position:
            return super().readinto(buffer)  # (which refuses read-only buffers)
        # Nothing buffered here: one copy, straight from what the bytes were received into, to the caller's
        # buffer. (BufferedReader fills a buffer no larger than its own through its own: a second copy.)
        view = view.cast("B")  # refuses strided buffers, as BufferedReader does
        filled = 0
        while filled < len(view):
            known = raw.size_if_known
            if known is not None and position + filled >= known:
                break
            got = raw.readinto(view[filled:] if filled else view)  # raw reads may be short
            if not got:
                break
            filled += got
        if filled:
            self.tell()  # BufferedReader caches the raw position for its seek fast path: show it moved
        return filled

    @property
    def etag(self) -> str:
        return self.raw.etag

    @property
    def failure(self) -> Optional[S3Error]:
        """The S3Error the last failed read raised, or None (see :attr:`ObjectReader.failure`)."""
        return self.raw.failure

    @property
    def bytes_fetched(self) -> int:
        """Bytes received from S3 for this stream so far."""
        return self.raw.bytes_fetched

    def __iter__(self) -> Iterator[bytes]:
        """Lines, as of any binary file: cut natively from the download while nothing else reads the stream
        (then through BufferedReader, from wherever that left the stream)."""
        # Nothing buffered here? (Both tell() calls raise if the stream is closed.)
        if self.raw.tell() == self.tell():
            stream = self.raw.line_stream(self._buffer_bytes)
            if stream is not None:
                return _core.lines(stream, self.readline)
        return self

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

    def __reduce__(self) -> Any:
        refuse_pickling(self.raw.name)
