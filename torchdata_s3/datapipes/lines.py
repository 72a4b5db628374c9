"""A line reader for ``(path, stream)`` pairs, registered as ``readlines`` when torchdata does not provide it.

The classic pipeline ``IterableWrapper(urls).load_files_by_s3().readlines(return_path=False)`` uses
torchdata's LineReader. With torchdata installed and imported, ``readlines`` is torchdata's own; without it,
this class stands in with the same arguments and results.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Union

from torch.utils.data.datapipes.datapipe import IterDataPipe

from .base import S3IterDataPipe

__all__ = ["LineReader"]

Line = Union[str, bytes]


class LineReader(S3IterDataPipe):
    r"""Yields the lines of each ``(path, stream)`` input, as ``(path, line)`` or just ``line``.

    Args:
        source_datapipe: ``(path, stream)`` pairs, e.g. from ``load_files_by_s3``.
        skip_lines: lines to skip at the start of each stream [0].
        strip_newline: remove the trailing ``\r\n`` / ``\n`` [True].
        decode: decode bytes lines to ``str`` [False].
        encoding: codec for ``decode`` ["utf-8"].
        errors: error handler for ``decode`` ["ignore"].
        return_path: yield ``(path, line)`` instead of ``line`` [True].
    """

    def __init__(
        self,
        source_datapipe: IterDataPipe[tuple[str, IO]],
        *,
        skip_lines: int = 0,
        strip_newline: bool = True,
        decode: bool = False,
        encoding: str = "utf-8",
        errors: str = "ignore",
        return_path: bool = True,
    ) -> None:
        super().__init__()
        self.source_datapipe = source_datapipe
        self.skip_lines = skip_lines
        self.strip_newline = strip_newline
        self.decode = decode
        self.encoding = encoding
        self.errors = errors
        self.return_path = return_path

    def _lines(self, stream: IO) -> Iterator[Line]:
        for number, line in enumerate(stream):
            if number < self.skip_lines:
                continue
            if self.decode and isinstance(line, bytes):
                line = line.decode(self.encoding, self.errors)
            if self.strip_newline:
                line = line.rstrip(b"\r\n" if isinstance(line, bytes) else "\r\n")
            yield line

    def __iter__(self) -> Iterator[Union[Line, tuple[str, Line]]]:
        for path, stream in self.source_datapipe:
            try:
                if self.return_path:
                    for line in self._lines(stream):
                        yield path, line
                else:
                    yield from self._lines(stream)
            finally:
                close = getattr(stream, "close", None)
                if close is not None:
                    close()
