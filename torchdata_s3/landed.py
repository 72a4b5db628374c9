"""A small object's stream once all of it has arrived: what the loading doors yield for objects of at most
``S3Config.small_object_bytes`` (1 MiB) and at most a part.

A small object is fetched with one GET and received into one ``bytes``; once that GET has ended there is
nothing left to fetch, seek back to or plan, so the Python layers of
:class:`~torchdata_s3.reader.S3ObjectStream` (a raw reader under a BufferedReader, some forty calls per
object) only cost time: on the 2-core AMD VM the reader's thread spent two thirds of its time in the
interpreter for 110 kB objects (docs/benchmarks.md, run 40).
:class:`LandedObjectStream` is an ``io.BytesIO`` over that very ``bytes`` (BytesIO shares it until written to,
and ``read()`` of all of it returns it: no copy), read at C speed, with the stream's own attributes. The
original torchdata loader yielded a ``BytesIO`` too, so every reader that took its streams takes these.
"""

from __future__ import annotations

import io
from typing import Any, NoReturn, Optional

from .errors import S3Error
from .url import S3Url

__all__ = ["LandedObjectStream", "refuse_pickling"]


def refuse_pickling(url: str) -> NoReturn:
    """What pickling a stream of ours raises: its bytes stay in this process, and a DataLoader worker should
    return data, not streams."""
    raise TypeError(
        f"a stream of an S3 object ({url}) cannot be pickled or sent to another process: its bytes are in "
        "this process. In a DataLoader with workers, pass transform= (e.g. lambda s: s.read(), or a decoder) "
        "so that workers return data instead of streams"
    )


class LandedObjectStream(io.BytesIO):
    """A seekable, read-only binary file object over an object received whole: ``read``, ``readinto``,
    ``readline``, iteration over lines, ``seek``/``tell``, as an ``io.BytesIO``; also ``read_chunk()``,
    ``size``, ``etag``, ``bytes_fetched``, ``url`` (and ``name``), ``bucket``, ``key`` and ``failure``, as
    :class:`~torchdata_s3.reader.S3ObjectStream` has them."""

    def __init__(self, data: bytes, location: S3Url, *, etag: str, bytes_fetched: int) -> None:
        super().__init__(data)
        self.location = location
        self.name = f"s3://{location.bucket}/{location.key}"
        self._size = len(data)
        self._etag = etag
        self._bytes_fetched = bytes_fetched

    @property
    def size(self) -> int:
        return self._size

    @property
    def etag(self) -> str:
        return self._etag

    @property
    def bytes_fetched(self) -> int:
        return self._bytes_fetched

    @property
    def failure(self) -> Optional[S3Error]:
        return None  # every byte has arrived: no read can fail

    @property
    def url(self) -> str:
        return self.name

    @property
    def bucket(self) -> str:
        return self.location.bucket

    @property
    def key(self) -> str:
        return self.location.key

    def read_chunk(self) -> Optional[bytes]:
        """The rest of the object (the received ``bytes`` itself when none was read), or None at the end."""
        return self.read() or None

    # Read-only, like every stream of an object being read.
    def writable(self) -> bool:
        return False

    def write(self, data: Any) -> int:
        raise io.UnsupportedOperation(f"{self.name} is open for reading")

    def writelines(self, lines: Any) -> None:
        raise io.UnsupportedOperation(f"{self.name} is open for reading")

    def truncate(self, size: Optional[int] = None) -> int:
        raise io.UnsupportedOperation(f"{self.name} is open for reading")

    def getbuffer(self) -> memoryview:
        # BytesIO's is a writable export that blocks close() while it lives: a read-only view of the bytes.
        return memoryview(self.getvalue())

    def __repr__(self) -> str:
        return f"<torchdata_s3 LandedObjectStream {self.name}>"

    def __reduce__(self) -> NoReturn:
        refuse_pickling(self.name)

    def __reduce_ex__(self, protocol: Any) -> NoReturn:  # BytesIO defines its own; ours must win
        refuse_pickling(self.name)
