"""What the loader yields its streams in: torch's ``StreamWrapper``, a read loop's calls made direct."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Optional, Union

from torch.utils.data.datapipes.utils.common import StreamWrapper

from .. import _core

__all__ = ["S3StreamWrapper"]


class S3StreamWrapper(StreamWrapper):
    """torch's ``StreamWrapper`` around a stream of the loader's (what the original loader's ``BytesIO``
    came in, so ``isinstance`` checks and torch's closing of streams behave the same).

    torch's wrapper reaches every method of the stream through ``__getattr__`` (about a microsecond a call)
    and iterates it through a generator (a step per line). Here the calls of a read loop are the stream's own
    and iterating the wrapper iterates the stream: in one process, lines of 64 MiB objects 1,100 -> 1,230
    MB/s. Unlike torch's generator, a loop over lines left early does not close the stream.
    """

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.file_obj)

    def read(self, size: Optional[int] = -1) -> bytes:
        return self.file_obj.read(size)  # type: ignore[no-any-return]

    def readinto(self, buffer: Any) -> int:
        return self.file_obj.readinto(buffer)  # type: ignore[no-any-return]

    def readline(self, size: Optional[int] = -1) -> bytes:
        return self.file_obj.readline(size)  # type: ignore[no-any-return]

    def read_chunk(self) -> Optional[Union[_core.Buffer, bytes]]:
        return self.file_obj.read_chunk()  # type: ignore[no-any-return]
