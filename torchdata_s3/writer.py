"""Writing one S3 object as a binary file object: nothing is visible until ``close()`` commits it.

:class:`S3ObjectWriter` is an :class:`io.BufferedWriter` over :class:`ObjectUploader`, the policy of one
upload:

- Bytes are held back until more than ``multipart_threshold_bytes`` were written. An object closed below
  that goes out as one PutObject with a known length.
- Beyond it the upload streams: a multipart upload whose parts (``part_size_bytes``) the native core sends
  in parallel as they fill. ``write()`` copies into the CRT's part buffers and returns; it waits only while
  ``write_window_bytes`` are in flight unacknowledged. So a writer holds at most about
  ``multipart_threshold_bytes + part_size_bytes + write_window_bytes`` of memory, whatever the object's size.
- ``close()`` commits: the object appears only then, whole. An exception inside ``with``, :meth:`abort`,
  or a writer dropped without ``close()`` aborts instead: the multipart upload is aborted on the server and
  no object (and no half of one) appears.
- Waits: ``request_timeout_ms`` does not bound an upload (a part on a slow link may take longer than a
  response may pause). A connection that moves no byte for a while is dropped by the CRT and its request
  retried (``max_retries``), so a dead endpoint still ends in a typed error; ``abort()`` waits at most
  ``request_timeout_ms`` for the server to confirm.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
from typing import TYPE_CHECKING, Any, Optional

from . import _core
from .errors import S3Error
from .url import S3Url

if TYPE_CHECKING:
    from .client import S3Client

__all__ = ["CHECKSUM_ALGORITHMS", "ObjectUploader", "S3ObjectWriter", "multipart_etag"]

CHECKSUM_ALGORITHMS = ("crc32c", "crc64nvme")

# What S3 may answer a CompleteMultipartUpload sent again after the first completed the upload (see
# ObjectUploader._completed_although).
_LOST_COMPLETION_CODES = ("NoSuchUpload", "PreconditionFailed", "ConditionalRequestConflict")

# What io.BufferedWriter gathers small writes into before handing them to the uploader: one native call (and
# one GIL release) per MiB instead of per pickle opcode.
_COALESCE_BYTES = 1024 * 1024


def multipart_etag(part_etags: list[str]) -> Optional[str]:
    """The ETag S3 gives an object completed from parts with these ETags, in part order: the MD5 of their
    binary MD5s, then ``-`` and their count. None if a part's ETag is not an MD5 (as with SSE-KMS or SSE-C),
    or there are none."""
    digests = []
    for etag in part_etags:
        text = etag.strip('"')
        if len(text) != 32:
            return None
        try:
            digests.append(bytes.fromhex(text))
        except ValueError:
            return None
    if not digests:
        return None
    return f"{hashlib.md5(b''.join(digests), usedforsecurity=False).hexdigest()}-{len(digests)}"


class ObjectUploader(io.RawIOBase):
    """The raw, write-only side of one upload (see the module docstring). Use :class:`S3ObjectWriter`."""

    def __init__(
        self, client: S3Client, location: S3Url, *, overwrite: bool = True, checksum: Optional[str] = None
    ) -> None:
        super().__init__()
        if checksum is not None and checksum not in CHECKSUM_ALGORITHMS:
            raise ValueError(f"checksum must be None or one of {CHECKSUM_ALGORITHMS}, got {checksum!r}")
        self._client = client
        self._location = location
        self._overwrite = overwrite
        self._checksum = checksum or ""
        self._pid = os.getpid()
        self._pending = bytearray()  # written before the upload started
        self._upload: Optional[_core.ObjectUpload] = None
        self._written = 0
        self._outcome = ""  # "", "committed", "aborted" or "failed"
        self._sent_whole = False  # send() started the whole object as one PutObject
        self.etag = ""  # the object's ETag once committed

    @property
    def name(self) -> str:
        return str(self._location)

    @property
    def outcome(self) -> str:
        """ "committed", "aborted", "failed", or "" while open."""
        return self._outcome

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._written

    def write(self, data: Any) -> int:
        self._check_usable()
        if self._sent_whole:
            raise ValueError(f"write() after send() on the uploader of {self.name}")
        size = memoryview(data).nbytes
        try:
            if self._upload is None:
                if len(self._pending) + size <= self._client.config.multipart_threshold_bytes:
                    self._pending += data
                    self._written += size
                    return size
                self._upload = self._start(body=None)
                self._upload.write(self._pending)
                self._pending = bytearray()
            self._upload.write(data)
        except BaseException:
            self._fail()
            raise
        self._written += size
        return size

    def send(self, data: Any) -> None:
        """Starts uploading `data` as the whole object at once (one PutObject) and returns without waiting;
        ``close()`` then waits for it and commits. Only on a fresh uploader, for at most
        ``multipart_threshold_bytes``; no ``write()`` afterwards."""
        self._check_usable()
        if self._upload is not None or self._written:
            raise ValueError(f"send() on an uploader of {self.name} that was already written to")
        size = memoryview(data).nbytes
        if size > self._client.config.multipart_threshold_bytes:
            raise ValueError(
                f"send() takes at most multipart_threshold_bytes, not {size} bytes ({self.name})"
            )
        self._upload = self._start(body=data)
        self._written = size
        self._sent_whole = True

    def close(self) -> None:
        """Commits the object (once); raises if it cannot be committed, after aborting the upload."""
        if self.closed:
            return
        try:
            if not self._outcome:
                self._commit()
        finally:
            super().close()

    def abort(self) -> None:
        """Abandons the object: nothing is committed, a multipart upload is aborted. Idempotent."""
        if self._outcome or os.getpid() != self._pid:
            super().close()
            return
        self._outcome = "aborted"
        self._pending = bytearray()
        try:
            if self._upload is not None:
                self._upload.abort()
        finally:
            super().close()

    def __del__(self) -> None:
        # io.IOBase would close() (commit) a writer dropped half-written: abort instead. (A writer whose
        # __init__ raised has no _pid and nothing to abort.)
        if not self.closed and getattr(self, "_pid", None) == os.getpid():
            with contextlib.suppress(Exception):  # nothing can be reported from a finaliser
                self.abort()

    def _commit(self) -> None:
        self._check_usable()
        try:
            if self._upload is None:
                upload = self._start(body=self._pending)
                self._pending = bytearray()
            else:
                upload = self._upload
            try:
                self.etag = upload.complete()
            except S3Error as error:
                found = self._completed_although(upload, error)
                if found is None:
                    raise
                self.etag = found
        except BaseException:
            self._fail()
            raise
        self._outcome = "committed"

    def _completed_although(self, upload: _core.ObjectUpload, error: S3Error) -> Optional[str]:
        """The object's ETag if `error` came from a CompleteMultipartUpload sent again after an attempt whose
        answer was lost, and the object in place is this upload's; else None.

        S3 answers NoSuchUpload to a second CompleteMultipartUpload once the first completed the upload, or,
        for a writer that may not overwrite (If-None-Match: *), may find the object the first one made and
        answer 412 (409 if it collides with that completion): the write succeeded although the call that
        reported it failed (boto3 reports it failed). The object's ETag, which S3 makes of its parts' ETags,
        tells whether the object in place is made of this upload's parts: then it is this upload's, or another
        writer's of the same bytes in the same parts. Where a part's ETag is not an MD5 (SSE-KMS, SSE-C) it
        cannot be told, and the error stands.
        """
        if error.s3_error_code not in _LOST_COMPLETION_CODES or not upload.completion_unanswered:
            return None
        expected = multipart_etag([etag for _number, etag in upload.part_etags()])
        if expected is None:
            return None
        try:
            found = self._client.head(self.name)
        except S3Error:
            return None
        if found.etag.strip('"') != expected or found.size != self._written:
            return None
        return found.etag

    def _start(self, body: Optional[bytearray]) -> _core.ObjectUpload:
        config = self._client.config
        native = self._client._native_for(self._location, "PutObject")
        return native.put_object(
            self._location.bucket,
            self._location.key,
            body=body,
            if_none_match=not self._overwrite,
            checksum_algorithm=self._checksum,
            in_flight_limit_bytes=config.write_window_bytes,
            abort_timeout_ms=config.request_timeout_ms,
        )

    def _fail(self) -> None:
        if self._outcome:
            return
        self._outcome = "failed"
        self._pending = bytearray()
        if self._upload is not None:
            self._upload.abort()

    def _check_usable(self) -> None:
        if self.closed or self._outcome:
            raise ValueError(f"I/O operation on a closed writer ({self.name}, {self._outcome or 'closed'})")
        if os.getpid() != self._pid:
            raise io.UnsupportedOperation(
                f"the writer of {self.name} was opened in process {self._pid}, before fork(); a writer "
                f"belongs to the process that opened it: open a new one in this process"
            )


class S3ObjectWriter(io.BufferedWriter):
    """A writable binary file object for one S3 object; obtain it from ``torchdata_s3.open(url, "wb")``.

    ``write``, ``writelines``, ``tell`` and ``flush`` behave as for a local file opened ``"wb"`` (``flush``
    hands buffered bytes to the upload; it does not commit). ``close()`` commits the object: it appears only
    then, whole. An exception inside a ``with`` block, :meth:`abort`, or a writer garbage-collected without
    ``close()`` aborts the upload instead: no object appears. Not seekable.

    Raises (from ``write``/``close``): S3PermissionError, S3FileNotFoundError (no such bucket),
    S3ObjectExistsError (``overwrite=False`` and the object exists), S3NetworkError, S3Error;
    ValueError after close; io.UnsupportedOperation in a fork() child of the opening process.
    """

    def __init__(self, uploader: ObjectUploader) -> None:
        super().__init__(uploader, buffer_size=_COALESCE_BYTES)
        self._uploader = uploader

    @property
    def url(self) -> str:
        return self._uploader.name

    @property
    def etag(self) -> str:
        """The committed object's ETag ("" before a successful ``close()``)."""
        return self._uploader.etag

    def abort(self) -> None:
        """Abandons the object: nothing is committed. Idempotent; a no-op after a successful close()."""
        self._uploader.abort()

    def close(self) -> None:
        if self.closed:
            return
        try:
            self.flush()
        except BaseException:
            self._uploader.abort()
            raise
        finally:
            super().close()  # commits through the uploader, unless the flush failed and aborted it

    def __exit__(self, exc_type: Any, exc: Any, traceback: Any) -> None:
        if exc_type is not None:
            self.abort()
        else:
            self.close()

    def __del__(self) -> None:
        # Not io's close() (that would commit a half-written object): abort, quietly (nothing can be
        # reported from a finaliser, and at interpreter exit the native module may be gone already).
        if getattr(self, "_uploader", None) is not None and not self.closed:
            with contextlib.suppress(Exception):
                self.abort()

    def __repr__(self) -> str:
        return f"<S3ObjectWriter {self.url}>"
