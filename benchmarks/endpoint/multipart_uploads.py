"""S3 multipart uploads on the local endpoint: parts are files, completion concatenates them in the kernel.

An upload is the directory ``<data_root>/.uploads/<upload id>`` holding ``upload.json`` (bucket, key, when it
began) and one file per part, ``<part number, 5 digits>``. UploadPart renames the body nginx received to its
part file. Complete and Abort first claim the directory by renaming it (``<id>.completing`` /
``<id>.aborting``), so two of them, or a part arriving meanwhile, cannot both act on it. Complete copies
the listed parts in order into one file with ``os.copy_file_range`` (no trip through user space) and renames
it into place through :meth:`ObjectStore.commit`.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import secrets
import shutil
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import BinaryIO, Optional

from benchmarks.endpoint.object_store import ObjectStore
from benchmarks.endpoint.s3_errors import S3Error

MIN_PART_BYTES = 5 * 1024 * 1024
"""S3 refuses to complete an upload whose parts, but the last, are smaller (EntityTooSmall); so do we, so a
client that passes here does not fail on S3."""
MAX_PART_NUMBER = 10_000

_UPLOAD_ID = re.compile(r"^[0-9a-f]{32}$")
_METADATA = "upload.json"
_COPY_CHUNK_BYTES = 1 << 30


class MultipartUploads:
    """Create, UploadPart, Complete, Abort and List for uploads stored under ``store.uploads_dir``."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store

    def create(self, bucket: str, key: str) -> str:
        """Begin an upload of ``key``; return its id. Raises S3Error as :meth:`ObjectStore.object_path`."""
        self.store.object_path(bucket, key)
        upload_id = secrets.token_hex(16)
        directory = self.store.uploads_dir / upload_id
        directory.mkdir()
        initiated = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        (directory / _METADATA).write_text(json.dumps({"bucket": bucket, "key": key, "initiated": initiated}))
        return upload_id

    def put_part(self, bucket: str, key: str, upload_id: str, part_number: str, body: Path) -> str:
        """Store ``body`` (renamed; gone afterwards) as part ``part_number``; return the part's ETag.
        Raises S3Error 404 NoSuchUpload, or 400 InvalidArgument for a part number outside 1..10000."""
        try:
            number = _part_number(part_number)
            directory = self._upload_dir(bucket, key, upload_id)
            try:
                os.replace(body, directory / f"{number:05d}")
            except FileNotFoundError:  # completed or aborted meanwhile
                raise _no_such_upload(upload_id) from None
            return _part_etag(directory / f"{number:05d}")
        finally:
            if body.exists():
                body.unlink()

    def complete(
        self, bucket: str, key: str, upload_id: str, request_body: bytes, only_if_absent: bool = False
    ) -> str:
        """Concatenate the parts listed in the CompleteMultipartUpload document ``request_body`` into the
        object; return its ETag. Raises S3Error: 404 NoSuchUpload; 400 MalformedXML, InvalidPartOrder,
        InvalidPart (missing, or ETag not the one UploadPart answered), EntityTooSmall; 412 as
        :meth:`ObjectStore.commit`. On a 4xx the upload stays, to be completed again or aborted."""
        directory = self._upload_dir(bucket, key, upload_id)
        parts = _listed_parts(request_body)
        part_files = [directory / f"{number:05d}" for number, _ in parts]
        for (number, etag), part_file in zip(parts, part_files):
            if not part_file.is_file() or _part_etag(part_file).strip('"') != etag.strip('"'):
                raise S3Error(400, "InvalidPart", f"Part {number} was not uploaded or its ETag is not {etag}")
        sizes = [part_file.stat().st_size for part_file in part_files]
        if any(size < MIN_PART_BYTES for size in sizes[:-1]):
            raise S3Error(
                400, "EntityTooSmall", "Your proposed upload is smaller than the minimum allowed size"
            )
        claimed = directory.with_name(f"{upload_id}.completing")
        try:
            os.rename(directory, claimed)
        except FileNotFoundError:
            raise _no_such_upload(upload_id) from None
        try:
            assembled = claimed / "object"
            with open(assembled, "wb") as target:
                for number, _ in parts:
                    _append(claimed / f"{number:05d}", target)
            etag = self.store.commit(assembled, bucket, key, only_if_absent)
        except BaseException:
            os.rename(claimed, directory)  # give the upload back: the client may retry or abort it
            raise
        shutil.rmtree(claimed, ignore_errors=True)
        return etag

    def abort(self, bucket: str, key: str, upload_id: str) -> None:
        """Discard the upload and its parts. Raises S3Error 404 NoSuchUpload."""
        directory = self._upload_dir(bucket, key, upload_id)
        claimed = directory.with_name(f"{upload_id}.aborting")
        try:
            os.rename(directory, claimed)
        except FileNotFoundError:
            raise _no_such_upload(upload_id) from None
        shutil.rmtree(claimed, ignore_errors=True)

    def pending(self, bucket: str, prefix: str = "") -> list[dict[str, str]]:
        """The uploads of ``bucket`` begun and neither completed nor aborted, keys starting with ``prefix``,
        as dicts with ``key``, ``upload_id`` and ``initiated``, in S3's order (key, then id)."""
        self.store.bucket_dir(bucket)
        found = []
        for entry in os.scandir(self.store.uploads_dir):
            if not _UPLOAD_ID.match(entry.name):
                continue
            metadata = _metadata(Path(entry.path))
            if metadata and metadata["bucket"] == bucket and metadata["key"].startswith(prefix):
                found.append(
                    {"key": metadata["key"], "upload_id": entry.name, "initiated": metadata["initiated"]}
                )
        return sorted(found, key=lambda upload: (upload["key"].encode("utf-8"), upload["upload_id"]))

    def _upload_dir(self, bucket: str, key: str, upload_id: Optional[str]) -> Path:
        if not upload_id or not _UPLOAD_ID.match(upload_id):
            raise _no_such_upload(upload_id or "")
        directory = self.store.uploads_dir / upload_id
        metadata = _metadata(directory)
        if metadata is None or (metadata["bucket"], metadata["key"]) != (bucket, key):
            raise _no_such_upload(upload_id)
        return directory


def _metadata(directory: Path) -> Optional[dict[str, str]]:
    try:
        return json.loads((directory / _METADATA).read_text())
    except (FileNotFoundError, NotADirectoryError, ValueError):
        return None


def _part_number(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = 0
    if not 1 <= number <= MAX_PART_NUMBER:
        raise S3Error(400, "InvalidArgument", f"Part number must be an integer between 1 and 10000: {text!r}")
    return number


def _part_etag(part_file: Path) -> str:
    """Unique to one stored part (a part uploaded again gets a new one), as S3's MD5 ETag would be."""
    status = part_file.stat()
    return f'"{status.st_size:x}-{status.st_mtime_ns:x}-{status.st_ino:x}"'


def _listed_parts(request_body: bytes) -> list[tuple[int, str]]:
    """(part number, ETag) in the order listed; raises S3Error 400 MalformedXML or InvalidPartOrder."""
    try:
        root = ElementTree.fromstring(request_body)
        parts = []
        for element in root.iter():
            if element.tag.rsplit("}", 1)[-1] != "Part":
                continue
            fields = {child.tag.rsplit("}", 1)[-1]: (child.text or "").strip() for child in element}
            parts.append((int(fields["PartNumber"]), fields["ETag"]))
    except (ElementTree.ParseError, KeyError, ValueError):
        raise S3Error(400, "MalformedXML", "The XML you provided was not well-formed") from None
    if not parts:
        raise S3Error(400, "MalformedXML", "CompleteMultipartUpload lists no parts")
    numbers = [number for number, _ in parts]
    if numbers != sorted(set(numbers)):
        raise S3Error(400, "InvalidPartOrder", "The list of parts was not in ascending order")
    return parts


def _append(part_file: Path, target: BinaryIO) -> None:
    """Copy ``part_file`` to the end of open file ``target``, in the kernel when it can."""
    with open(part_file, "rb") as source:
        copied = 0
        try:
            while True:
                count = os.copy_file_range(source.fileno(), target.fileno(), _COPY_CHUNK_BYTES)
                if not count:
                    return
                copied += count
        except OSError:
            if copied:
                raise
        shutil.copyfileobj(source, target)  # a file system or kernel without it: the ordinary way


def _no_such_upload(upload_id: str) -> S3Error:
    return S3Error(
        404,
        "NoSuchUpload",
        "The specified upload does not exist. The upload ID may be invalid, or the upload may have been "
        "aborted or completed.",
        upload_id,
    )
