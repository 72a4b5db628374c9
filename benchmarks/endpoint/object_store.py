"""Objects written through the endpoint: request bodies in, files renamed atomically into place, deletes.

nginx receives a PUT's body into a file of ``<data_root>/.uploads/.incoming-<run>`` (the data root's own
filesystem, so moving it into place is a rename, not a copy) and tells the sidecar the file's name; the
sidecar decodes it if it is aws-chunked, then renames it to ``<data_root>/<bucket>/<key>``: readers see the
old object or the new one, never a part. Every change is recorded in the bucket's key index under the
bucket's lock (:class:`benchmarks.endpoint.bucket_indexes.BucketIndexes`).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Optional

from benchmarks.endpoint.aws_chunked import MalformedAwsChunked, decode_aws_chunked, is_aws_chunked
from benchmarks.endpoint.bucket_indexes import UPLOADS_DIRECTORY, BucketIndexes
from benchmarks.endpoint.key_index import nginx_etag
from benchmarks.endpoint.s3_errors import S3Error

MAX_KEY_BYTES = 1024  # S3's limit
_MAX_SEGMENT_BYTES = 255  # a file name's limit on Linux file systems


class ObjectStore:
    """Writes and deletes objects under ``root``; request bodies arrive as files in ``incoming_dir``, which
    must be a directory of ``<root>/.uploads``."""

    def __init__(self, indexes: BucketIndexes, incoming_dir: Path) -> None:
        self.indexes = indexes
        self.uploads_dir = indexes.root / UPLOADS_DIRECTORY
        self.incoming_dir = Path(incoming_dir)
        if self.incoming_dir.parent != self.uploads_dir:
            raise ValueError(f"{incoming_dir} is not a directory of {self.uploads_dir}")

    def bucket_dir(self, bucket: str) -> Path:
        """The bucket's directory; raises S3Error 404 NoSuchBucket."""
        directory = self.indexes.bucket_dir(bucket)
        if directory is None:
            raise S3Error(404, "NoSuchBucket", "The specified bucket does not exist", bucket)
        return directory

    def object_path(self, bucket: str, key: str) -> Path:
        """Where object ``key`` of ``bucket`` is stored. Raises S3Error: 404 NoSuchBucket, 400
        KeyTooLongError, or 501 NotImplemented for a key that cannot be a file path ('' segments, '.',
        '..', a trailing '/')."""
        directory = self.bucket_dir(bucket)
        if len(key.encode("utf-8", "surrogateescape")) > MAX_KEY_BYTES:
            raise S3Error(400, "KeyTooLongError", "Your key is too long", key)
        segments = key.split("/")
        if (
            "\0" in key
            or any(segment in ("", ".", "..") for segment in segments)
            or any(
                len(segment.encode("utf-8", "surrogateescape")) > _MAX_SEGMENT_BYTES for segment in segments
            )
        ):
            raise S3Error(
                501,
                "NotImplemented",
                "This endpoint stores each object as a file; a key with an empty, '.' or '..' path segment, "
                "a trailing '/', or a segment over 255 bytes cannot be one",
                key,
            )
        return directory.joinpath(*segments)

    def received_body(self, body_file: Optional[str], headers: dict[str, str]) -> Path:
        """The request body as a plain file in ``incoming_dir`` (the caller renames or deletes it).

        ``body_file``: the file nginx wrote (None or "" for an empty body). ``headers``: the request's, with
        lower-case names. An aws-chunked body is decoded into a new file and the original deleted. Raises
        S3Error 400 for a body file outside ``incoming_dir`` or a malformed aws-chunked body.
        """
        if not body_file:
            empty_fd, empty_name = tempfile.mkstemp(dir=self.incoming_dir, prefix="empty-")
            os.close(empty_fd)
            return Path(empty_name)
        received = Path(body_file)
        if received.parent != self.incoming_dir:
            raise S3Error(400, "InvalidRequest", f"request body file {body_file} is not one nginx wrote")
        if not is_aws_chunked(headers.get("content-encoding"), headers.get("x-amz-content-sha256")):
            return received
        decoded_length = headers.get("x-amz-decoded-content-length")
        decoded_fd, decoded_name = tempfile.mkstemp(dir=self.incoming_dir, prefix="decoded-")
        try:
            with open(received, "rb") as source, os.fdopen(decoded_fd, "wb") as target:
                decode_aws_chunked(source, target, int(decoded_length) if decoded_length else None)
        except (MalformedAwsChunked, ValueError) as malformed:
            os.unlink(decoded_name)
            raise S3Error(
                400, "IncompleteBody", f"Content-Encoding: aws-chunked body could not be decoded: {malformed}"
            ) from None
        finally:
            received.unlink()
        return Path(decoded_name)

    def commit(self, source: Path, bucket: str, key: str, only_if_absent: bool = False) -> str:
        """Rename ``source`` to the object's path, record it, and return its ETag (the one nginx will send for
        it). ``only_if_absent`` (``If-None-Match: *``): raise S3Error 412 if the object exists. ``source`` is
        gone afterwards, whatever happens. Raises S3Error 501 if the key collides with a directory."""
        try:
            target = self.object_path(bucket, key)
            with self.indexes.changing(bucket) as index:
                try:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    if only_if_absent:
                        os.link(source, target)  # fails if the target exists: check and create are one step
                    else:
                        os.replace(source, target)
                except FileExistsError:
                    if only_if_absent and target.is_file():
                        raise S3Error(
                            412,
                            "PreconditionFailed",
                            "At least one of the pre-conditions you specified did not hold",
                        ) from None
                    raise _collision(key) from None
                except (IsADirectoryError, NotADirectoryError):
                    raise _collision(key) from None
                status = target.stat()
                if index is not None:
                    index.record(key, status.st_size, int(status.st_mtime))
        finally:
            with contextlib.suppress(FileNotFoundError):
                source.unlink()
        return nginx_etag(int(status.st_mtime), status.st_size)

    def delete(self, bucket: str, key: str) -> None:
        """Delete the object if it exists (S3 answers 204 either way), and empty directories it leaves."""
        try:
            target = self.object_path(bucket, key)
        except S3Error as refused:
            if refused.status == 501:
                return  # such a key cannot have been stored, so there is nothing to delete
            raise
        with self.indexes.changing(bucket) as index:
            try:
                target.unlink()
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                return
            if index is not None:
                index.forget(key)
            bucket_dir = self.bucket_dir(bucket)
            parent = target.parent
            while parent != bucket_dir:  # S3 has no directories: a prefix with no objects is gone
                try:
                    parent.rmdir()
                except OSError:
                    break
                parent = parent.parent


def _collision(key: str) -> S3Error:
    return S3Error(
        501,
        "NotImplemented",
        "This endpoint stores each object as a file; the key collides with a directory of other objects' "
        "keys (or a path component of the key is an object)",
        key,
    )
