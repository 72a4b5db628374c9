"""The listing sidecar: a small threaded HTTP server answering S3's bucket-level requests over a directory.

nginx serves the objects themselves; it forwards bucket-level requests here:

* ``GET /<bucket>?list-type=2&...`` (also ``/<bucket>/?...``): ListObjectsV2 over ``<root>/<bucket>``;
  without ``list-type``: ListObjects (V1, marker-based).
* ``HEAD /<bucket>``: 200 if the bucket directory exists, else 404.

An unknown bucket answers 404 ``NoSuchBucket``; anything else bucket-level answers 501 ``NotImplemented``.
Each bucket's key index is built on its first listing and kept: datasets are static during a run.

Run it as ``python -m benchmarks.endpoint.listing_server --root DIR [--port N]``; it binds 127.0.0.1 only,
and prints ``listening on http://127.0.0.1:<port>`` once it accepts connections (``--port 0``, the
default, picks a free port).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Optional
from urllib.parse import parse_qs, unquote, urlsplit

from benchmarks.endpoint.key_index import KeyIndex
from benchmarks.endpoint.list_objects_v1 import render_v1
from benchmarks.endpoint.list_objects_v2 import InvalidListRequest, ListRequest, list_page, render_list_page
from benchmarks.endpoint.s3_errors import s3_error_document

LOOPBACK_HOST = "127.0.0.1"

_BUCKET_PATH = re.compile(r"^/([^/]+)/?$")


class _LazyKeyIndex:
    """A bucket's :class:`KeyIndex`, built by the first request that needs it; later ones reuse it."""

    def __init__(self, bucket_dir: Path) -> None:
        self._bucket_dir = bucket_dir
        self._lock = threading.Lock()  # concurrent first listings build the index once, not once each
        self._index: Optional[KeyIndex] = None

    def get(self) -> KeyIndex:
        with self._lock:
            if self._index is None:
                self._index = KeyIndex(self._bucket_dir)
            return self._index


class ListingServer(ThreadingHTTPServer):
    """Serves ListObjectsV2 and HEAD bucket for the buckets (directories) directly under ``root``.

    ``port=0`` (the default) binds a free port; read it back from ``server_address``.
    """

    daemon_threads = True  # a connection nginx keeps alive must not keep the process from exiting
    request_queue_size = 128

    def __init__(self, root: Path, port: int = 0) -> None:
        super().__init__((LOOPBACK_HOST, port), ListingRequestHandler)
        self.root = Path(root)
        self._indexes: dict[str, _LazyKeyIndex] = {}
        self._indexes_lock = threading.Lock()

    @property
    def port(self) -> int:
        return self.server_address[1]

    def bucket_dir(self, bucket: str) -> Optional[Path]:
        """The directory of ``bucket``, or None when there is no such bucket."""
        if bucket in (".", "..") or "\0" in bucket:
            return None
        directory = self.root / bucket
        return directory if directory.is_dir() else None

    def index_for(self, bucket: str) -> Optional[KeyIndex]:
        """The key index of ``bucket`` (built now if this is its first use), or None if it does not exist."""
        directory = self.bucket_dir(bucket)
        if directory is None:
            return None
        with self._indexes_lock:
            lazy_index = self._indexes.setdefault(bucket, _LazyKeyIndex(directory))
        return lazy_index.get()


class ListingRequestHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive, so nginx's upstream connections are reused rather than reopened."""

    protocol_version = "HTTP/1.1"
    # Headers and body leave in separate writes; with Nagle's algorithm the body would wait for the
    # delayed ACK of the headers, adding ~40 ms to every listing.
    disable_nagle_algorithm = True
    server: ListingServer

    def do_GET(self) -> None:
        self._answer(send_body=True)

    def do_HEAD(self) -> None:
        self._answer(send_body=False)

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
        index = self.server.index_for(bucket)
        if index is None:
            self._send_error(404, "NoSuchBucket", "The specified bucket does not exist", resource=bucket)
            return
        try:
            if version == ["2"]:
                request = ListRequest.from_query(query)
                body = render_list_page(bucket, request, list_page(index, request))
            else:
                body = render_v1(bucket, index, query)  # the original torchdata lister speaks V1
        except InvalidListRequest as error:
            self._send_error(400, "InvalidArgument", str(error))
            return
        self._send(200, body, send_body)

    def _send_error(self, status: int, code: str, message: str, resource: Optional[str] = None) -> None:
        self._send(status, s3_error_document(code, message, resource).encode("utf-8"), send_body=True)

    def _send(self, status: int, body: bytes, send_body: bool) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body) if send_body else 0))
        self.end_headers()
        if send_body:
            self.wfile.write(body)


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--root", type=Path, required=True, help="directory holding one directory per bucket")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default 0: a free one)")
    arguments = parser.parse_args(argv)
    if not arguments.root.is_dir():
        parser.error(f"--root {arguments.root} is not a directory")
    with ListingServer(arguments.root, arguments.port) as server:
        print(f"listening on http://{LOOPBACK_HOST}:{server.port}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how a person stops it
            server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
