"""Which S3 write operation a request is, and its answer; the sidecar's half of the endpoint's write path.

nginx forwards every write here (see :mod:`benchmarks.endpoint.nginx_config`); a PUT's body arrives as a file
nginx already wrote, named by the ``X-Endpoint-Body-File`` header. Operations:

* object level: PutObject, UploadPart, CreateMultipartUpload, CompleteMultipartUpload,
  AbortMultipartUpload, DeleteObject;
* bucket level: ListMultipartUploads (``GET /<bucket>?uploads``), DeleteObjects (``POST /<bucket>?delete``),
  CreateBucket (``PUT /<bucket>``).

Anything else that would change data (CopyObject, UploadPartCopy, ``If-Match`` writes, ListParts, ...)
answers 501 NotImplemented naming what is missing, rather than doing something else.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from typing import Callable, Optional
from xml.sax.saxutils import escape

from benchmarks.endpoint.list_objects_v2 import S3_XML_NAMESPACE
from benchmarks.endpoint.multipart_uploads import MultipartUploads
from benchmarks.endpoint.object_store import ObjectStore
from benchmarks.endpoint.s3_errors import S3Error

BODY_FILE_HEADER = "x-endpoint-body-file"
"""Set by nginx on forwarded PUTs: the file holding the request body ("" or absent: an empty body)."""
DELAY_HEADER = "x-endpoint-delay-ms"
"""Set by nginx (profile ``s3like``) on forwarded writes: how long the sidecar waits before answering."""

_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


@dataclass
class Answer:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


class WriteRequests:
    """Answers write requests against ``store``; see the module docstring for which."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self.uploads = MultipartUploads(store)

    def answer(
        self,
        method: str,
        bucket: str,
        key: Optional[str],
        query: dict[str, list[str]],
        headers: dict[str, str],
        read_body: Callable[[], bytes],
    ) -> Optional[Answer]:
        """The answer to a write (``key`` None for bucket-level requests), or None if the request is not one
        (a listing, HEAD bucket: the caller answers those). ``headers`` have lower-case names; ``read_body``
        returns the request body (the small ones: a part list, a delete list). Raises S3Error."""
        if key is None:
            return self._bucket_level(method, bucket, query, read_body)
        if method == "PUT":
            return self._put(bucket, key, query, headers)
        if method == "POST" and "uploads" in query:
            upload_id = self.uploads.create(bucket, key)
            return _xml(
                "InitiateMultipartUploadResult",
                f"<Bucket>{escape(bucket)}</Bucket><Key>{escape(key)}</Key><UploadId>{upload_id}</UploadId>",
            )
        if method == "POST" and "uploadId" in query:
            etag = self.uploads.complete(
                bucket, key, query["uploadId"][0], read_body(), _only_if_absent(headers)
            )
            return _xml(
                "CompleteMultipartUploadResult",
                f"<Bucket>{escape(bucket)}</Bucket><Key>{escape(key)}</Key><ETag>{escape(etag)}</ETag>",
            )
        if method == "DELETE" and "uploadId" in query:
            self.uploads.abort(bucket, key, query["uploadId"][0])
            return Answer(204)
        if method == "DELETE":
            self.store.delete(bucket, key)
            return Answer(204)
        raise _not_implemented(f"{method} of an object with query {sorted(query)}")

    def _put(self, bucket: str, key: str, query: dict[str, list[str]], headers: dict[str, str]) -> Answer:
        for header in ("x-amz-copy-source", "if-match"):
            if header in headers:
                raise _not_implemented(f"PUT with {header} (CopyObject, UploadPartCopy, conditional writes)")
        only_if_absent = _only_if_absent(headers)
        if "uploadId" in query or "partNumber" in query:
            if "uploadId" not in query or "partNumber" not in query:
                raise S3Error(400, "InvalidRequest", "UploadPart needs both partNumber and uploadId")
            self.store.object_path(bucket, key)
            body = self.store.received_body(headers.get(BODY_FILE_HEADER), headers)
            etag = self.uploads.put_part(bucket, key, query["uploadId"][0], query["partNumber"][0], body)
        else:
            self.store.object_path(bucket, key)  # refuse before decoding anything
            body = self.store.received_body(headers.get(BODY_FILE_HEADER), headers)
            etag = self.store.commit(body, bucket, key, only_if_absent)
        echoed = {name: value for name, value in headers.items() if name.startswith("x-amz-checksum-")}
        return Answer(200, {"ETag": etag, **echoed})

    def _bucket_level(
        self, method: str, bucket: str, query: dict[str, list[str]], read_body: Callable[[], bytes]
    ) -> Optional[Answer]:
        if method == "GET" and "uploads" in query:
            prefix = query.get("prefix", [""])[0]
            entries = "".join(
                f"<Upload><Key>{escape(upload['key'])}</Key><UploadId>{upload['upload_id']}</UploadId>"
                f"<Initiated>{upload['initiated']}</Initiated><StorageClass>STANDARD</StorageClass></Upload>"
                for upload in self.uploads.pending(bucket, prefix)
            )
            return _xml(
                "ListMultipartUploadsResult",
                f"<Bucket>{escape(bucket)}</Bucket><Prefix>{escape(prefix)}</Prefix>"
                f"<MaxUploads>1000</MaxUploads><IsTruncated>false</IsTruncated>{entries}",
            )
        if method == "POST" and "delete" in query:
            return self._delete_objects(bucket, read_body())
        if method == "PUT" and not query:
            if not _BUCKET_NAME.match(bucket):
                raise S3Error(400, "InvalidBucketName", "The specified bucket is not valid.", bucket)
            (self.store.indexes.root / bucket).mkdir(exist_ok=True)
            return Answer(200, {"Location": f"/{bucket}"})
        if method in ("GET", "HEAD"):
            return None
        raise _not_implemented(f"{method} of a bucket with query {sorted(query)}")

    def _delete_objects(self, bucket: str, request_body: bytes) -> Answer:
        try:
            root = ElementTree.fromstring(request_body)
        except ElementTree.ParseError:
            raise S3Error(400, "MalformedXML", "The XML you provided was not well-formed") from None
        quiet = any(element.tag.endswith("Quiet") and element.text == "true" for element in root.iter())
        keys = [element.text or "" for element in root.iter() if element.tag.rsplit("}", 1)[-1] == "Key"]
        if len(keys) > 1000:
            raise S3Error(400, "MalformedXML", "DeleteObjects takes at most 1000 keys")
        for key in keys:
            self.store.delete(bucket, key)
        deleted = "" if quiet else "".join(f"<Deleted><Key>{escape(key)}</Key></Deleted>" for key in keys)
        return _xml("DeleteResult", deleted)


def _only_if_absent(headers: dict[str, str]) -> bool:
    condition = headers.get("if-none-match")
    if condition is None:
        return False
    if condition.strip() != "*":
        raise _not_implemented(f"If-None-Match: {condition} on a write (only '*' is supported)")
    return True


def _xml(element: str, content: str) -> Answer:
    document = (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<{element} xmlns="{S3_XML_NAMESPACE}">{content}</{element}>'
    )
    return Answer(200, {"Content-Type": "application/xml"}, document.encode("utf-8", "surrogateescape"))


def _not_implemented(what: str) -> S3Error:
    return S3Error(501, "NotImplemented", f"The local benchmark endpoint does not implement {what}")
