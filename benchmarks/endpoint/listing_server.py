"""The listing sidecar: a small threaded HTTP server answering S3's bucket-level requests over a directory.

nginx serves the objects themselves; it forwards bucket-level requests here:

* ``GET /<bucket>?list-type=2&...`` (also ``/<bucket>/?...``): ListObjectsV2 over ``<root>/<bucket>``;
  without ``list-type``: ListObjects (V1, marker-based).
* ``HEAD /<bucket>``: 200 if the bucket directory exists, else 404.

An unknown bucket answers 404 ``NoSuchBucket``; anything else bucket-level answers 501 ``NotImplemented``.
Each bucket's key index is built on its first listing and kept (:mod:`benchmarks.endpoint.bucket_indexes`).

With ``--incoming DIR`` (the endpoint's ``writes=True``) it also answers the writes nginx forwards, object
and bucket level (:mod:`benchmarks.endpoint.write_requests`), and records each change in the key index so
listings see it at once.

Run it as ``python -m benchmarks.endpoint.listing_server --root DIR [--port N] [--incoming DIR]``; it binds
127.0.0.1 only,
and prints ``listening on http://127.0.0.1:<port>`` once it accepts connections (``--port 0``, the
default, picks a free port).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Optional
from urllib.parse import parse_qs, unquote, urlsplit

from benchmarks.endpoint.bucket_indexes import BucketIndexes
from benchmarks.endpoint.key_index import KeyIndex
from benchmarks.endpoint.list_objects_v1 import render_v1
from benchmarks.endpoint.list_objects_v2 import InvalidListRequest, ListRequest, list_page, render_list_page
from benchmarks.endpoint.object_store import ObjectStore
from benchmarks.endpoint.s3_errors import S3Error, s3_error_document
from benchmarks.endpoint.write_requests import BODY_FILE_HEADER, DELAY_HEADER, Answer, WriteRequests

LOOPBACK_HOST = "127.0.0.1"

_MAX_SMALL_BODY_BYTES = 16 * 1024 * 1024  # a 10,000-part list is about 1 MB

_BUCKET_PATH = re.compile(r"^/([^/]+)/?$")
_OBJECT_PATH = re.compile(r"^/([^/]+)/(.+)$", re.DOTALL)


class ListingServer(ThreadingHTTPServer):
    """Serves ListObjectsV2 and HEAD bucket for the buckets (directories) directly under ``root``.

    ``port=0`` (the default) binds a free port; read it back from ``server_address``. ``incoming_dir``:
    where nginx writes request bodies (``<root>/.uploads/<name>``); given, writes are answered too.
    """

    daemon_threads = True  # a connection nginx keeps alive must not keep the process from exiting
    request_queue_size = 128

    def __init__(self, root: Path, port: int = 0, incoming_dir: Optional[Path] = None) -> None:
        super().__init__((LOOPBACK_HOST, port), ListingRequestHandler)
        self.root = Path(root)
        self.indexes = BucketIndexes(self.root)
        self.writes = WriteRequests(ObjectStore(self.indexes, incoming_dir)) if incoming_dir else None

    @property
    def port(self) -> int:
        return self.server_address[1]

    def bucket_dir(self, bucket: str) -> Optional[Path]:
        """The directory of ``bucket``, or None when there is no such bucket."""
        return self.indexes.bucket_dir(bucket)


class ListingRequestHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive, so nginx's upstream connections are reused rather than reopened."""

    protocol_version = "HTTP/1.1"
    # Headers and body leave in separate writes; with Nagle's algorithm the body would wait for the
    # delayed ACK of the headers, adding ~40 ms to every listing.
    disable_nagle_algorithm = True
    server: ListingServer
    _body_read = False

    def do_GET(self) -> None:
        if not self._answered_write():
            self._answer(send_body=True)

    def do_HEAD(self) -> None:
        if not self._answered_write():
            self._answer(send_body=False)

    def do_PUT(self) -> None:
        if self.server.writes is None:
            self.send_error(501, f"Unsupported method ({self.command!r})")  # as without writes ever
        elif not self._answered_write():
            self._send_error(501, "NotImplemented", f"{self.command} {self.path}")

    do_POST = do_DELETE = do_PUT

    def log_request(self, code: object = "-", size: object = "-") -> None:
        """Silent: a benchmark lists thousands of pages. Errors are still logged to stderr."""

    def _answer(self, send_body: bool) -> None:
        url = urlsplit(self.path)
        bucket_match = _BUCKET_PATH.match(url.path)
        if bucket_match is None:
            self._send_error(400, "InvalidRequest", "The listing server only answers bucket-level requests.")
            return
        bucket = unquote(bucket_match.group(1))
        if self.command == "HEAD":
            status = 200 if self.server.bucket_dir(bucket) is not None else 404
            self._send(status, b"", send_body=False)
            return
        query = parse_qs(url.query, keep_blank_values=True)
        version = query.get("list-type", ["1"])
        if version not in (["1"], ["2"]):
            self._send_error(400, "InvalidArgument", f"list-type must be 1 or 2, got {version[0]!r}")
            return
        try:
            with self.server.indexes.reading(bucket) as index:
                if index is None:
                    self._send_error(
                        404, "NoSuchBucket", "The specified bucket does not exist", resource=bucket
                    )
                    return
                body = _listing(bucket, index, version, query)
        except InvalidListRequest as error:
            self._send_error(400, "InvalidArgument", str(error))
            return
        self._send(200, body, send_body)

    def _answered_write(self) -> bool:
        """Answer the request if it is a write (and writes are on); False if it is for :meth:`_answer`."""
        writes = self.server.writes
        headers = {name.lower(): value for name, value in self.headers.items()}
        body_file = headers.get(BODY_FILE_HEADER)
        self._body_read = False
        try:
            if writes is None:
                return False
            url = urlsplit(self.path)
            bucket_match = _BUCKET_PATH.match(url.path) or _OBJECT_PATH.match(url.path)
            if bucket_match is None:
                return False
            bucket = unquote(bucket_match.group(1))
            key = unquote(bucket_match.group(2)) if bucket_match.lastindex == 2 else None
            query = parse_qs(url.query, keep_blank_values=True)
            time.sleep(float(headers.get(DELAY_HEADER, "0")) / 1000)
            try:
                answer = writes.answer(self.command, bucket, key, query, headers, self._read_small_body)
            except S3Error as refused:
                answer = Answer(refused.status, {"Content-Type": "application/xml"}, refused.document())
            if answer is None:
                return False
            if not self._body_read:
                self._read_small_body()  # an unread body would be taken for the next request
            self._send_answer(answer)
            return True
        finally:
            if body_file and body_file.startswith(str(self.server.root)):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(body_file)  # a refused request's body: no one else will delete it

    def _read_small_body(self) -> bytes:
        """The request body (nginx always sends a Content-Length); over 16 MiB: S3Error 400, and the
        connection closes after the answer, since the body stays unread."""
        length = int(self.headers.get("Content-Length") or 0)
        self._body_read = True
        if length > _MAX_SMALL_BODY_BYTES:
            self.close_connection = True
            raise S3Error(400, "MaxMessageLengthExceeded", "Your request was too big.")
        return self.rfile.read(length)

    def _send_answer(self, answer: Answer) -> None:
        self.send_response(answer.status)
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(answer.body)))
        self.end_headers()
        if answer.body and self.command != "HEAD":
            self.wfile.write(answer.body)

    def _send_error(self, status: int, code: str, message: str, resource: Optional[str] = None) -> None:
        self._send(status, s3_error_document(code, message, resource).encode("utf-8"), send_body=True)

    def _send(self, status: int, body: bytes, send_body: bool) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body) if send_body else 0))
        self.end_headers()
        if send_body:
            self.wfile.write(body)


def _listing(bucket: str, index: KeyIndex, version: list[str], query: dict[str, list[str]]) -> bytes:
    if version == ["2"]:
        request = ListRequest.from_query(query)
        return render_list_page(bucket, request, list_page(index, request))
    return render_v1(bucket, index, query)  # the original torchdata lister speaks V1


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--root", type=Path, required=True, help="directory holding one directory per bucket")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default 0: a free one)")
    parser.add_argument(
        "--incoming",
        type=Path,
        help="answer writes; nginx writes request bodies into this directory of ROOT/.uploads",
    )
    arguments = parser.parse_args(argv)
    if not arguments.root.is_dir():
        parser.error(f"--root {arguments.root} is not a directory")
    with ListingServer(arguments.root, arguments.port, arguments.incoming) as server:
        print(f"listening on http://{LOOPBACK_HOST}:{server.port}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how a person stops it
            server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
