"""An S3-protocol listing endpoint over generated keys, with an S3-like latency per page.

``GET /<bucket>?list-type=2&prefix=&delimiter=&max-keys=&continuation-token=&start-after=`` (also
``/<bucket>/?...``) answers ListObjectsV2 over the bucket's key space (:mod:`benchmarks.endpoint.
generated_keys`: buckets ``tree``, ``flat`` and ``skewed``, ``--keys`` keys each, computed, never stored;
:mod:`benchmarks.endpoint.generated_listing` for the page). ``HEAD /<bucket>`` answers 200 for those buckets;
any object request answers 404 NoSuchKey, anything else 501 NotImplemented, an unknown bucket 404.

Every answer (errors included) leaves ``--latency-ms`` (default 100) after its request arrived, or as soon as
it is ready if computing it took longer. One event loop serves every connection and the wait is a timer, so
hundreds of requests in flight each see the latency rather than queueing behind each other.

Options that make it behave like particular S3 buckets:

* ``--refuse-start-after``: a request with ``start-after`` gets 400 InvalidArgument, as S3 Express One
  Zone directory buckets refuse StartAfter ("not supported for directory buckets").
* ``--slowdown-rate R``: that fraction of requests (spread evenly: request k is refused when floor(k R)
  moves) gets 503 SlowDown with S3's error document.

``--access-log FILE`` appends ``<status> <body bytes>`` per request, the format of nginx's access log in
the harness (:mod:`benchmarks.endpoint.access_log`), so a measurement's requests are counted the same way.

Run it as ``python -m benchmarks.endpoint.generated_server [--keys N] [--port N] ...``; it binds 127.0.0.1
only and prints ``listening on http://127.0.0.1:<port>`` once it accepts connections. :class:`
GeneratedEndpoint` starts and stops it as a child process.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections import deque
from http import HTTPStatus
from pathlib import Path
from types import TracebackType
from typing import IO, Optional
from urllib.parse import parse_qs, unquote, urlsplit

from benchmarks.endpoint.generated_keys import SHAPES, KeySpace, key_space
from benchmarks.endpoint.generated_listing import generated_page, render_generated_page
from benchmarks.endpoint.list_objects_v2 import InvalidListRequest, ListRequest
from benchmarks.endpoint.nginx import _read_line_before, _start_announcing, _terminate
from benchmarks.endpoint.s3_errors import s3_error_document

LOOPBACK_HOST = "127.0.0.1"
DEFAULT_LATENCY_MS = 100.0
MAX_HEAD_BYTES = 64 * 1024  # a request head larger than this closes the connection

REFUSED_START_AFTER = (
    "The start-after parameter is not supported for directory buckets."  # S3 documents it as unsupported
)
SLOW_DOWN = "Please reduce your request rate."


class GeneratedListingServer:
    """The endpoint's state: its key spaces and behaviours, the request count and the access log. One event
    loop thread serves every connection (:class:`_Connection`), so none of it needs a lock.

    Why asyncio rather than a thread per connection: a listing client keeps 64 and more requests in flight,
    and the endpoint shares the machine's two cores with the client under test. Threads that each sleep out
    a page latency cost the endpoint about 3 ms of CPU per page in switches and GIL hand-offs, more than
    computing the page; here a page costs its computing and one write."""

    def __init__(
        self,
        spaces: dict[str, KeySpace],
        latency_ms: float = DEFAULT_LATENCY_MS,
        refuse_start_after: bool = False,
        slowdown_rate: float = 0.0,
        access_log: Optional[Path] = None,
    ) -> None:
        self.spaces = spaces
        self.latency_s = latency_ms / 1000
        self.refuse_start_after = refuse_start_after
        self.slowdown_rate = slowdown_rate
        self._requests = 0
        self._log: Optional[IO[str]] = open(access_log, "a") if access_log else None  # noqa: SIM115

    def slow_down_now(self) -> bool:
        """Whether this request is one of the ``slowdown_rate`` refused (evenly spread over requests)."""
        self._requests += 1
        k = self._requests
        rate = self.slowdown_rate
        return rate > 0 and math.floor(k * rate) != math.floor((k - 1) * rate)

    def log_answer(self, status: int, body_bytes: int) -> None:
        if self._log is not None:
            self._log.write(f"{status} {body_bytes}\n")
            self._log.flush()  # the harness counts a measurement's requests as soon as it ends

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def answer(self, method: str, target: str) -> tuple[int, bytes]:
        """The status and body for ``method`` on ``target`` (the request line's path and query)."""
        url = urlsplit(target)
        parts = url.path.lstrip("/").split("/", 1)
        bucket = unquote(parts[0])
        space = self.spaces.get(bucket)
        if space is None:
            return _error(404, "NoSuchBucket", "The specified bucket does not exist", bucket)
        if self.slow_down_now():
            return _error(503, "SlowDown", SLOW_DOWN)
        if len(parts) == 2 and parts[1]:
            return _error(404, "NoSuchKey", "The specified key does not exist.", unquote(parts[1]))
        if method == "HEAD":
            return 200, b""
        if method != "GET":
            return _error(501, "NotImplemented", f"{method} is not implemented here.")
        query = parse_qs(url.query, keep_blank_values=True)
        if "location" in query:
            return 200, (
                b'<?xml version="1.0" encoding="UTF-8"?>\n'
                b'<LocationConstraint xmlns="http://s3.amazonaws.com/doc/2006-03-01/"/>'
            )
        if query.get("list-type") != ["2"]:
            return _error(501, "NotImplemented", "This endpoint answers ListObjectsV2 (list-type=2) only.")
        if self.refuse_start_after and "start-after" in query:
            return _error(400, "InvalidArgument", REFUSED_START_AFTER, argument="start-after")
        try:
            request = ListRequest.from_query(query)
        except InvalidListRequest as invalid:
            return _error(400, "InvalidArgument", str(invalid))
        return 200, render_generated_page(bucket, request, generated_page(space, request), space.plain)


class _Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection: requests parsed as their bytes arrive, each answered
    ``latency_s`` after it arrived (or once computed, if that took longer), in the order they came."""

    def __init__(self, server: GeneratedListingServer) -> None:
        self.server = server
        self.loop = asyncio.get_running_loop()
        self.transport: Optional[asyncio.Transport] = None
        self.buffer = bytearray()
        self.body_to_skip = 0  # bytes of a PUT or POST body still to discard
        self.answers: deque[tuple[float, bytes, bool]] = deque()  # (due time, bytes, close after)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.transport = None

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while self.transport is not None:
            if self.body_to_skip:
                skipped = min(self.body_to_skip, len(self.buffer))
                del self.buffer[:skipped]
                self.body_to_skip -= skipped
                if self.body_to_skip:
                    return
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buffer) > MAX_HEAD_BYTES:
                    self.transport.close()
                return
            head = self.buffer[:end].decode("latin-1")
            del self.buffer[: end + 4]
            self._request(head)

    def _request(self, head: str) -> None:
        arrived = self.loop.time()
        request_line, *header_lines = head.split("\r\n")
        method, target, _version = request_line.split(" ", 2)
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        self.body_to_skip = int(headers.get("content-length") or 0)
        try:
            status, body = self.server.answer(method, target)
        except Exception as error:  # an endpoint bug: S3's 500 naming it, not a connection closed unanswered
            traceback.print_exc()
            status, body = _error(500, "InternalError", f"the generated endpoint failed: {error!r}")
        sent_body = body if method != "HEAD" else b""
        closing = headers.get("connection", "").lower() == "close"
        message = (
            f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
            f"Content-Type: application/xml\r\nContent-Length: {len(sent_body)}\r\n"
            + ("Connection: close\r\n" if closing else "")
            + "\r\n"
        ).encode("latin-1") + sent_body
        self.server.log_answer(status, len(sent_body))
        due = arrived + self.server.latency_s
        self.answers.append((due, message, closing))
        self.loop.call_at(due, self._send_due)

    def _send_due(self) -> None:
        now = self.loop.time()
        while self.answers and self.answers[0][0] <= now and self.transport is not None:
            _due, message, closing = self.answers.popleft()
            self.transport.write(message)
            if closing:
                self.transport.close()


async def _serve(server: GeneratedListingServer, port: int) -> None:
    loop = asyncio.get_running_loop()
    listener = await loop.create_server(
        lambda: _Connection(server), LOOPBACK_HOST, port, backlog=1024, reuse_address=True
    )
    bound = listener.sockets[0].getsockname()[1]
    print(f"listening on http://{LOOPBACK_HOST}:{bound}", flush=True)
    async with listener:
        await listener.serve_forever()


def _error(
    status: int, code: str, message: str, resource: Optional[str] = None, argument: Optional[str] = None
) -> tuple[int, bytes]:
    document = s3_error_document(code, message, resource)
    if argument is not None:  # S3 names the offending parameter of an InvalidArgument
        document = document.replace("</Error>", f"<ArgumentName>{argument}</ArgumentName></Error>")
    return status, document.encode("utf-8")


def spaces_for(keys: int, shapes: tuple[str, ...] = SHAPES, root: str = "") -> dict[str, KeySpace]:
    """One bucket per shape, named after it, of ``keys`` keys each."""
    return {shape: key_space(shape, keys, root) for shape in shapes}


class GeneratedEndpoint:
    """The server as our child process on a free loopback port; a context manager, stopped by pid.

    ``endpoint_url`` while started; ``pid`` (for its CPU time); ``access_log`` (its file)."""

    def __init__(
        self,
        keys: int,
        latency_ms: float = DEFAULT_LATENCY_MS,
        shapes: tuple[str, ...] = SHAPES,
        root: str = "",
        refuse_start_after: bool = False,
        slowdown_rate: float = 0.0,
        startup_timeout_s: float = 20.0,
    ) -> None:
        self.keys, self.latency_ms, self.shapes, self.root = keys, latency_ms, shapes, root
        self.refuse_start_after, self.slowdown_rate = refuse_start_after, slowdown_rate
        self.startup_timeout_s = startup_timeout_s
        self.port: Optional[int] = None
        self._process: Optional[subprocess.Popen[bytes]] = None
        self._run_dir: Optional[Path] = None

    @property
    def endpoint_url(self) -> str:
        if self.port is None:
            raise RuntimeError("the generated endpoint is not started")
        return f"http://{LOOPBACK_HOST}:{self.port}"

    @property
    def pid(self) -> int:
        if self._process is None:
            raise RuntimeError("the generated endpoint is not started")
        return self._process.pid

    @property
    def access_log(self) -> Path:
        if self._run_dir is None:
            raise RuntimeError("the generated endpoint is not started")
        return self._run_dir / "access.log"

    def start(self) -> GeneratedEndpoint:
        self._run_dir = Path(tempfile.mkdtemp(prefix="generated-endpoint-"))
        command = [
            sys.executable,
            "-m",
            "benchmarks.endpoint.generated_server",
            f"--keys={self.keys}",
            f"--latency-ms={self.latency_ms}",
            f"--shapes={','.join(self.shapes)}",
            f"--root={self.root}",
            f"--slowdown-rate={self.slowdown_rate}",
            f"--access-log={self.access_log}",
        ]
        if self.refuse_start_after:
            command.append("--refuse-start-after")
        stderr = self._run_dir / "server.stderr"
        self._process = _start_announcing(command, stderr)
        assert self._process.stdout is not None
        line = _read_line_before(self._process.stdout, time.monotonic() + self.startup_timeout_s)
        if not line.startswith("listening on "):
            self.stop()
            raise RuntimeError(
                f"the generated endpoint did not start: {line!r}\n{stderr.read_text()[-2000:]}"
            )
        self.port = int(line.rsplit(":", 1)[1])
        return self

    def cpu_seconds(self) -> float:
        """User + system CPU the server has used so far (from /proc)."""
        with open(f"/proc/{self.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self._process is not None:
            _terminate(self._process)
            if self._process.stdout is not None:
                self._process.stdout.close()
            self._process = None
        if self._run_dir is not None:
            shutil.rmtree(self._run_dir, ignore_errors=True)
            self._run_dir = None
        self.port = None

    def __enter__(self) -> GeneratedEndpoint:
        return self.start()

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        self.stop()


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--keys", type=int, default=1_000_000, help="keys per bucket [10^6]")
    parser.add_argument("--shapes", default=",".join(SHAPES), help=f"buckets to serve [{','.join(SHAPES)}]")
    parser.add_argument("--root", default="", help="put before every key [none]")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 [0: a free one]")
    parser.add_argument("--latency-ms", type=float, default=DEFAULT_LATENCY_MS, help="per answer [100]")
    parser.add_argument("--refuse-start-after", action="store_true", help="as S3 Express directory buckets")
    parser.add_argument("--slowdown-rate", type=float, default=0.0, help="fraction answered 503 SlowDown [0]")
    parser.add_argument("--access-log", type=Path, help="append '<status> <body bytes>' per request")
    arguments = parser.parse_args(argv)
    if not 0 <= arguments.slowdown_rate <= 1:
        parser.error("--slowdown-rate must be within [0, 1]")
    shapes = tuple(shape for shape in arguments.shapes.split(",") if shape)
    server = GeneratedListingServer(
        spaces_for(arguments.keys, shapes, arguments.root),
        arguments.latency_ms,
        arguments.refuse_start_after,
        arguments.slowdown_rate,
        arguments.access_log,
    )
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_serve(server, arguments.port))
    finally:
        server.close()


if __name__ == "__main__":
    sys.exit(main())
