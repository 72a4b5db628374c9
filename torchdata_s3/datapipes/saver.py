"""S3FileSaver: writes ``(url, data)`` items to S3 and yields each URL once its object is committed."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any, Callable, Optional

from ..client import S3Client
from ..config import S3Config
from ..options import config_from_arguments
from ..url import parse_s3_url
from ..writer import ObjectUploader, S3ObjectWriter
from .base import S3IterDataPipe
from .sharding import as_datapipe

__all__ = ["S3FileSaver"]

# What a file-like item is read in: one multipart part at a time goes to the writer.
_COPY_BYTES = 8 * 1024 * 1024


class S3FileSaver(S3IterDataPipe[str]):
    r"""Writes each ``(meta, data)`` item as one S3 object and yields its URL (functional name:
    ``save_by_s3``), as torchdata's ``save_by_fsspec`` / ``save_to_disk`` do for their targets.

    ``data`` is a bytes-like object, a binary file object (read to its end), or, with ``mode="w"``, a
    ``str`` (written as UTF-8). The URL is ``filepath_fn(meta)``, or ``meta`` itself.

    Small objects (up to ``multipart_threshold_bytes``) upload in parallel: up to ``max_in_flight`` of
    them and ``write_window_bytes`` of their bytes are on the wire at once, each one PutObject. A larger
    object, or a file object, streams through a writer (a multipart upload with parallel parts) after the
    small ones before it are done. URLs are yielded in input order, each once its object is committed; a
    failed object raises there, and objects still in flight behind it are aborted. Each object appears
    whole or not at all.

    Args:
        source_datapipe: ``(meta, data)`` items (an IterDataPipe or any iterable).
        mode: ``"wb"`` [default] or ``"w"`` (also accepts ``str`` data).
        filepath_fn: maps ``meta`` to the ``s3://bucket/key`` URL [None: ``meta`` is the URL].
        max_in_flight: small objects uploading at once [64].
        overwrite: replace existing objects [True]; False raises S3ObjectExistsError for an existing one.
        checksum: ``"crc32c"`` or ``"crc64nvme"``, computed while sending and verified by S3 [None].
        config: an :class:`S3Config` [None: from the environment]; ``**options`` are its fields.

    Raises (while iterating): InvalidS3UrlError, TypeError (data of another type), and the writers' errors.
    """

    def __init__(
        self,
        source_datapipe: Any,
        mode: str = "wb",
        filepath_fn: Optional[Callable[[Any], str]] = None,
        *,
        max_in_flight: int = 64,
        overwrite: bool = True,
        checksum: Optional[str] = None,
        config: Optional[S3Config] = None,
        **options: Any,
    ) -> None:
        if mode not in ("w", "wb"):
            raise ValueError(f"mode must be 'wb' or 'w', not {mode!r}")
        if not isinstance(max_in_flight, int) or max_in_flight < 1:
            raise ValueError(f"max_in_flight must be an integer >= 1, got {max_in_flight!r}")
        self.source_datapipe = as_datapipe(source_datapipe)
        self.mode = mode
        self.filepath_fn = filepath_fn
        self.max_in_flight = max_in_flight
        self.overwrite = overwrite
        self.checksum = checksum
        self.config = config_from_arguments(config, **options)

    def __iter__(self) -> Iterator[str]:
        client = S3Client(self.config)
        threshold = self.config.multipart_threshold_bytes
        in_flight: deque[tuple[str, ObjectUploader, int]] = deque()
        in_flight_bytes = 0
        try:
            for meta, data in self.source_datapipe:
                url = self.filepath_fn(meta) if self.filepath_fn is not None else meta
                body = self._as_bytes(url, data)
                if body is not None and memoryview(body).nbytes <= threshold:
                    size = memoryview(body).nbytes
                    while in_flight and (
                        len(in_flight) >= self.max_in_flight
                        or in_flight_bytes + size > self.config.write_window_bytes
                    ):
                        done_url, uploader, done_size = in_flight.popleft()
                        in_flight_bytes -= done_size
                        uploader.close()
                        yield done_url
                    uploader = self._uploader(client, url)
                    uploader.send(body)
                    in_flight.append((url, uploader, size))
                    in_flight_bytes += size
                    continue
                while in_flight:  # keep the input order: what was started before finishes first
                    done_url, uploader, done_size = in_flight.popleft()
                    in_flight_bytes -= done_size
                    uploader.close()
                    yield done_url
                self._stream(client, url, body if body is not None else data)
                yield url
            while in_flight:
                done_url, uploader, _ = in_flight.popleft()
                uploader.close()
                yield done_url
        finally:
            for _, uploader, _ in in_flight:  # a failure, or the consumer stopped early
                uploader.abort()

    def _uploader(self, client: S3Client, url: str) -> ObjectUploader:
        location = parse_s3_url(url)
        if location.is_prefix:
            raise IsADirectoryError(f"{url!r} names a prefix, not an object; drop the trailing '/'")
        return ObjectUploader(client, location, overwrite=self.overwrite, checksum=self.checksum)

    def _as_bytes(self, url: str, data: Any) -> Optional[Any]:
        """`data` as a bytes-like object, or None for a file object (streamed)."""
        if isinstance(data, str):
            if self.mode != "w":
                raise TypeError(f"str data for {url!r} needs mode='w' (written as UTF-8); mode is 'wb'")
            return data.encode("utf-8")
        if isinstance(data, (bytes, bytearray, memoryview)):
            return data
        if hasattr(data, "read"):
            return None
        try:
            memoryview(data)
        except TypeError:
            raise TypeError(
                f"data for {url!r} must be bytes-like, a binary file object or (mode='w') str, "
                f"not {type(data).__name__}"
            ) from None
        return data

    def _stream(self, client: S3Client, url: str, data: Any) -> None:
        # The writer aborts the upload if anything below raises: no object appears then.
        with S3ObjectWriter(self._uploader(client, url)) as writer:
            if not hasattr(data, "read"):
                writer.write(data)
                return
            while chunk := data.read(_COPY_BYTES):
                writer.write(chunk.encode("utf-8") if isinstance(chunk, str) and self.mode == "w" else chunk)
