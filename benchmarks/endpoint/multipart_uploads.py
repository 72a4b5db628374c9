"""S3 multipart uploads on the local endpoint: parts are files, copied into the object as they arrive.

An upload is the directory ``<data_root>/.uploads/<upload id>`` holding ``upload.json`` (bucket, key, when
it began) and one file per part, ``<part number, 5 digits>``. UploadPart renames the body nginx received to
its part file and copies it to its place in the object being assembled
(:mod:`benchmarks.endpoint.part_placement`), so that Complete, which had to copy every part after the last
one arrived (0.3-0.6 s for 256 MiB on the 2-core machine), only copies what could not be placed and
renames the result into place through :meth:`ObjectStore.commit`. Complete and Abort first claim the
directory by renaming it (``<id>.completing`` / ``<id>.aborting``) under the upload's lock, which
UploadPart holds while it stores and places a part: a part arriving after the claim finds no upload.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import secrets
import shutil
import threading
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Optional

from benchmarks.endpoint import part_placement
from benchmarks.endpoint.object_store import ObjectStore
from benchmarks.endpoint.s3_errors import S3Error

MIN_PART_BYTES = 5 * 1024 * 1024
"""S3 refuses to complete an upload whose parts, but the last, are smaller (EntityTooSmall); so do we, so a
client that passes here does not fail on S3."""
MAX_PART_NUMBER = 10_000

_UPLOAD_ID = re.compile(r"^[0-9a-f]{32}$")
_METADATA = "upload.json"


class MultipartUploads:
    """Create, UploadPart, Complete, Abort and List for uploads stored under ``store.uploads_dir``."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self._locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()

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
            part_file = directory / f"{number:05d}"
            with self._lock(upload_id):
                try:
                    os.replace(body, part_file)
                except FileNotFoundError:  # completed or aborted meanwhile
                    raise _no_such_upload(upload_id) from None
                etag = _part_etag(part_file)
                part_placement.place(directory, number, part_file, etag)
            return etag
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
        claimed = self._claim(directory, upload_id, "completing")
        try:
            numbers = [number for number, _ in parts]
            part_files = [claimed / f"{number:05d}" for number in numbers]
            for (number, etag), part_file in zip(parts, part_files):
                if not part_file.is_file() or _part_etag(part_file).strip('"') != etag.strip('"'):
                    raise S3Error(
                        400, "InvalidPart", f"Part {number} was not uploaded or its ETag is not {etag}"
                    )
            sizes = [part_file.stat().st_size for part_file in part_files]
            if any(size < MIN_PART_BYTES for size in sizes[:-1]):
                raise S3Error(
                    400, "EntityTooSmall", "Your proposed upload is smaller than the minimum allowed size"
                )
            etags = [_part_etag(part_file) for part_file in part_files]
            assembled = part_placement.assemble(claimed, numbers, etags, sizes)
            etag = self.store.commit(assembled, bucket, key, only_if_absent)
        except BaseException:
            part_placement.forget_placements(claimed)  # the assembly may be cut short or gone
            os.rename(claimed, directory)  # give the upload back: the client may retry or abort it
            raise
        self._forget_lock(upload_id)
        # Freeing the parts' pages need not delay the answer.
        threading.Thread(target=shutil.rmtree, args=(claimed, True), daemon=True).start()
        return etag

    def abort(self, bucket: str, key: str, upload_id: str) -> None:
        """Discard the upload and its parts. Raises S3Error 404 NoSuchUpload."""
        directory = self._upload_dir(bucket, key, upload_id)
        claimed = self._claim(directory, upload_id, "aborting")
        self._forget_lock(upload_id)
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

    def _claim(self, directory: Path, upload_id: str, purpose: str) -> Path:
        """Rename the upload's directory to ``<id>.<purpose>`` once no part is being stored; raises S3Error
        404 NoSuchUpload if another Complete or Abort claimed it first."""
        claimed = directory.with_name(f"{upload_id}.{purpose}")
        with self._lock(upload_id):
            try:
                os.rename(directory, claimed)
            except FileNotFoundError:
                raise _no_such_upload(upload_id) from None
        return claimed

    def _lock(self, upload_id: str) -> threading.Lock:
        with self._locks_lock:
            return self._locks.setdefault(upload_id, threading.Lock())

    def _forget_lock(self, upload_id: str) -> None:
        with self._locks_lock:
            self._locks.pop(upload_id, None)

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


def _no_such_upload(upload_id: str) -> S3Error:
    return S3Error(
        404,
        "NoSuchUpload",
        "The specified upload does not exist. The upload ID may be invalid, or the upload may have been "
        "aborted or completed.",
        upload_id,
    )
