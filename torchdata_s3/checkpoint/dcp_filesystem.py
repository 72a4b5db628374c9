"""torch's file system interface (``FileSystemBase``) over S3 objects, under torchdata_s3.dcp's writer and
reader: a checkpoint's URL, its objects' streams, and one save's account of the objects it wrote."""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Generator
from contextlib import contextmanager
from typing import Any, Optional, Union, cast

from torch.distributed.checkpoint.filesystem import FileSystemBase

from ..client import S3Client
from ..errors import S3FileNotFoundError
from ..url import parse_s3_url

__all__ = ["S3FileSystem", "checkpoint_url"]


def checkpoint_url(url: object) -> str:
    """`url` as a checkpoint prefix: ``s3://bucket`` or ``s3://bucket/key``, without a trailing ``/``.

    Raises:
        InvalidS3UrlError: not an ``s3://`` URL string.
    """
    location = parse_s3_url(url)
    return f"s3://{location.bucket}/{location.key}".rstrip("/")


class S3FileSystem(FileSystemBase):
    """torch's file system interface over S3 objects, for torch's FileSystemWriter/FileSystemReader.

    Keeps account of one save's writes: torch's writer threads drop their exceptions (a failed write would
    look like a finished one) and are not joined when the calling thread fails, so the writer needs the
    failures, the objects committed, and a way to stop the writes still running.
    """

    def __init__(self, client: S3Client, *, checksum: Optional[str] = None) -> None:
        self.client = client
        self.checksum = checksum
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._open_writers = 0
        self._abandoned = False
        self.committed: list[str] = []
        self.write_failures: list[BaseException] = []

    def start_writes(self) -> None:
        """Forgets the previous save's writes."""
        with self._lock:
            self._abandoned = False
            self.committed.clear()
            self.write_failures.clear()

    def abandon_writes(self) -> list[str]:
        """Makes the writers still open abort instead of committing, and new ones fail; waits for the open
        ones to finish. Returns the objects committed before."""
        with self._idle:
            self._abandoned = True
            self._idle.wait_for(lambda: self._open_writers == 0)
            return list(self.committed)

    @contextmanager
    def create_stream(self, path: Union[str, os.PathLike], mode: str) -> Generator[io.IOBase, None, None]:
        url = os.fspath(path)
        if mode == "rb":
            with self.client.open(url) as reader:
                yield reader
            return
        if mode != "wb":
            raise ValueError(f"mode must be 'rb' or 'wb', got {mode!r}")
        with self._lock:
            if self._abandoned:
                raise RuntimeError(f"{url} not written: another object of this checkpoint failed")
            self._open_writers += 1
        try:
            with self.client.open(url, "wb", checksum=self.checksum) as writer:
                stream = _SaveObjectWriter(self, url, writer)
                # Not an IOBase (whose finalizer would close, so commit, a stream torch dropped): torch only
                # writes, tells, flushes and closes what this yields.
                yield cast(io.IOBase, stream)
                stream.close()  # torch closes it itself; a stream closed twice commits once
        except BaseException as failure:  # the writer has aborted: no object
            with self._lock:
                self.write_failures.append(failure)
            raise
        finally:
            with self._idle:
                self._open_writers -= 1
                self._idle.notify_all()

    def commit(self, url: str, writer: io.IOBase) -> None:
        """Commits `writer` (its ``close()``) unless the save was abandoned meanwhile."""
        if self._abandoned:  # the caller's `with` aborts the writer
            raise RuntimeError(f"{url} not committed: another object of this checkpoint failed")
        writer.close()
        with self._lock:
            self.committed.append(url)

    def concat_path(self, path: Union[str, os.PathLike], suffix: str) -> str:
        return f"{os.fspath(path).rstrip('/')}/{suffix}"

    def init_path(self, path: Union[str, os.PathLike], **_: Any) -> str:
        return checkpoint_url(path)

    def rename(self, path: Union[str, os.PathLike], new_path: Union[str, os.PathLike]) -> None:
        raise io.UnsupportedOperation(
            f"S3 has no rename ({os.fspath(path)} -> {os.fspath(new_path)}); write the final name directly"
        )

    def mkdir(self, path: Union[str, os.PathLike]) -> None:
        pass  # S3 has no directories: a prefix exists once an object under it does

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: Union[str, os.PathLike]) -> bool:
        try:
            checkpoint_url(checkpoint_id)
        except ValueError:
            return False
        return True

    def exists(self, path: Union[str, os.PathLike]) -> bool:
        try:
            self.client.head(os.fspath(path))
        except S3FileNotFoundError:
            return False
        return True

    def rm_file(self, path: Union[str, os.PathLike]) -> None:
        self.client.delete(os.fspath(path))


class _SaveObjectWriter:
    """The stream torch writes one object of a save through: the S3 writer, whose commit goes through
    :meth:`S3FileSystem.commit`, so that an abandoned save commits nothing more. torch needs only these
    methods of it."""

    def __init__(self, fs: S3FileSystem, url: str, writer: io.IOBase) -> None:
        self._fs = fs
        self._url = url
        self._writer = writer
        self.closed = False

    def write(self, data: Any) -> int:
        return self._writer.write(data)

    def tell(self) -> int:
        return self._writer.tell()

    def flush(self) -> None:
        if not self.closed:
            self._writer.flush()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._fs.commit(self._url, self._writer)
