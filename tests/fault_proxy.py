"""A fault-injecting HTTP/1.1 reverse proxy for the tests: it sits between the code under test and the moto
server and, for chosen requests, answers 503/500, drops the connection, cuts or stalls the body, or holds
the answer back.

Real sockets on loopback (optionally TLS towards the client, with an ``ssl.SSLContext`` the test makes), one
thread per client connection, keep-alive towards the client (the CRT reuses
connections); one fresh upstream connection per request (moto's server closes after every answer). Faults
are chosen per request from a seeded RNG, or forced for "the next N" eligible requests so that a test can
aim at one request exactly. What was injected is counted, and every request is recorded.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import enum
import http.client
import random
import selectors
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from typing import Callable, Optional
from urllib.parse import urlsplit


class Fault(str, enum.Enum):
    """What the proxy can do to one request instead of forwarding it faithfully."""

    SLOW_DOWN = "slow_down"  # answer 503 with S3's SlowDown error document
    INTERNAL_ERROR = "internal_error"  # answer 500 with S3's InternalError error document
    # Answer 200 OK with that same document: S3 may fail a request after it sent 200 ("200 InternalError").
    INTERNAL_ERROR_IN_200 = "internal_error_in_200"
    # Answer 400 InvalidArgument, as S3 Express directory buckets answer a ListObjectsV2 with StartAfter.
    INVALID_ARGUMENT = "invalid_argument"
    DROP = "drop"  # read the request, then close the connection without answering
    CUT_BODY = "cut_body"  # forward the answer's headers (true Content-Length) and half its body, then close
    STALL_BODY = "stall_body"  # forward the headers and half the body, then send nothing more
    NO_ANSWER = "no_answer"  # read the request, then send nothing at all
    # Read the request's headers and half its body, then close (an upload cut off).
    CUT_REQUEST = "cut_request"
    # Forward the request with the middle byte of its body inverted (corruption on the way).
    FLIP_REQUEST_BYTE = "flip_request_byte"
    # Forward the request, then hold the whole answer back for slow_answer_s: a store that works silently
    # before it answers (moto completing a large upload).
    SLOW_ANSWER = "slow_answer"


# Faults applied while the request is still arriving.
_DURING_REQUEST = {Fault.CUT_REQUEST}
# Faults that need the upstream's answer to be applied (the others are decided without asking moto).
_NEEDS_UPSTREAM = {Fault.CUT_BODY, Fault.STALL_BODY}
# A fixed order makes one RNG draw map to the same fault for the same seed.
_DRAW_ORDER = list(Fault)

_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
}

_ERROR_DOCUMENTS = {
    Fault.SLOW_DOWN: (503, "Slow Down", "SlowDown", "Please reduce your request rate."),
    Fault.INTERNAL_ERROR: (
        500,
        "Internal Server Error",
        "InternalError",
        "We encountered an internal error.",
    ),
    Fault.INTERNAL_ERROR_IN_200: (200, "OK", "InternalError", "We encountered an internal error."),
    Fault.INVALID_ARGUMENT: (
        400,
        "Bad Request",
        "InvalidArgument",
        "This operation does not support StartAfter.",
    ),
}


@dataclasses.dataclass(frozen=True)
class ProxiedRequest:
    """One request as the proxy received it."""

    method: str
    target: str  # path and query, as sent
    headers: Mapping[str, str]  # lower-cased names

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def query(self) -> str:
        return urlsplit(self.target).query

    @property
    def s3_operation(self) -> str:
        """The S3 operation of a path-style request, as far as the tests need to tell them apart."""
        _bucket, _, key = self.path.lstrip("/").partition("/")
        query = self.query
        if self.method == "POST" and "uploads" in query.split("&"):
            return "CreateMultipartUpload"
        if self.method == "POST" and "uploadId=" in query:
            return "CompleteMultipartUpload"
        if self.method == "PUT" and "x-amz-copy-source" in self.headers:
            return "UploadPartCopy" if "partNumber=" in query else "CopyObject"
        if self.method == "PUT" and "partNumber=" in query:
            return "UploadPart"
        if self.method == "DELETE" and "uploadId=" in query:
            return "AbortMultipartUpload"
        if self.method == "PUT" and key:
            return "PutObject"
        if self.method == "GET" and key:
            return "GetObject"
        return f"{self.method} {'object' if key else 'bucket'}"

    @property
    def is_get_object(self) -> bool:
        """A path-style GetObject (``GET /bucket/key``); ListObjects is ``GET /bucket?list-type=2``."""
        bucket, _, key = self.path.lstrip("/").partition("/")
        return self.method == "GET" and bool(bucket) and bool(key) and "list-type" not in self.query


def is_get_object(request: ProxiedRequest) -> bool:
    return request.is_get_object


def any_request(request: ProxiedRequest) -> bool:
    return True


def operation_is(name: str) -> Callable[[ProxiedRequest], bool]:
    """Eligibility for the requests of one S3 operation (see :attr:`ProxiedRequest.s3_operation`)."""
    return lambda request: request.s3_operation == name


@dataclasses.dataclass(frozen=True)
class ErrorAnswer:
    """An S3 error answer: HTTP status and reason, then the error document's Code and Message."""

    status: int
    reason: str
    code: str
    message: str


@dataclasses.dataclass(frozen=True)
class RequestRecord:
    """What the proxy saw and did: one entry per request, in order of arrival."""

    method: str
    path: str
    query: str
    range: str  # the Range header, "" if none
    if_match: str  # the If-Match header, "" if none
    fault: Optional[Fault]
    status: int  # status sent (or that would have been sent, for cut and stalled bodies); 0 if none
    if_none_match: str = ""  # the If-None-Match header, "" if none
    headers: Mapping[str, str] = dataclasses.field(default_factory=dict)  # lower-cased names
    body: bytes = b""  # the request body as received, when the proxy records bodies
    operation: str = ""  # its ProxiedRequest.s3_operation


class FaultProxy:
    """``http://127.0.0.1:<free port>`` forwarding to ``127.0.0.1:upstream_port`` with faults on request.

    Args:
        upstream_port: the port of the real server on loopback.
        seed: seeds the RNG that draws faults.
        stall_s: how long a stalled or unanswered request stays silent at most (it also ends when the
            client closes the connection, or the proxy stops).
        latency_s: every answer waits this long after its request arrived (a far endpoint's round trip).
        slow_answer_s: how long a SLOW_ANSWER holds its answer back.
        tls: serve HTTPS to the client with this server context (the faults then happen inside TLS).
    """

    def __init__(
        self,
        upstream_port: int,
        *,
        seed: int = 0,
        stall_s: float = 60.0,
        latency_s: float = 0.0,
        slow_answer_s: float = 3.0,
        tls: Optional[ssl.SSLContext] = None,
    ) -> None:
        self.upstream_port = upstream_port
        self.stall_s = stall_s
        self.latency_s = latency_s
        self.slow_answer_s = slow_answer_s
        self._tls = tls
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._rates: dict[Fault, float] = {}
        self._eligible: Callable[[ProxiedRequest], bool] = is_get_object
        self._forced: collections.deque[Fault] = collections.deque()
        self._injected: collections.Counter[Fault] = collections.Counter()
        self._records: list[RequestRecord] = []
        self._gate: Optional[Callable[[ProxiedRequest], Optional[ErrorAnswer]]] = None
        self._refused: collections.Counter[str] = collections.Counter()
        self.record_bodies = False  # keep each request's body in its record (uploads are checked at the wire)
        self.keep_records = True  # False: keep none (a long soak would hold one per request)
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []

        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self._listener.settimeout(0.2)  # the accept loop checks for stop() this often
        self.port = self._listener.getsockname()[1]
        self.endpoint_url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self._acceptor = threading.Thread(target=self._accept_loop, name="fault-proxy-accept", daemon=True)
        self._acceptor.start()

    # ---- configuration -------------------------------------------------------------------------------------

    def set_rates(
        self, rates: Mapping[Fault, float], *, eligible: Callable[[ProxiedRequest], bool] = is_get_object
    ) -> None:
        """Each eligible request gets fault F with probability ``rates[F]`` (one draw per request)."""
        if any(rate < 0 for rate in rates.values()) or sum(rates.values()) > 1:
            raise ValueError(f"fault rates must be >= 0 and sum to at most 1, got {dict(rates)}")
        with self._lock:
            self._rates = dict(rates)
            self._eligible = eligible

    def force(
        self, fault: Fault, count: int = 1, *, eligible: Optional[Callable[[ProxiedRequest], bool]] = None
    ) -> None:
        """The next `count` eligible requests get `fault`, before any drawn by rate."""
        with self._lock:
            if eligible is not None:
                self._eligible = eligible
            self._forced.extend([fault] * count)

    def set_gate(self, gate: Optional[Callable[[ProxiedRequest], Optional[ErrorAnswer]]]) -> None:
        """`gate` sees every request first: an ErrorAnswer it returns is sent instead of forwarding (as S3
        refuses a request: an expired token, a rate exceeded), and counted in `refused` by its code."""
        with self._lock:
            self._gate = gate

    @property
    def refused(self) -> collections.Counter[str]:
        """How many requests the gate refused, by error code."""
        with self._lock:
            return collections.Counter(self._refused)

    def forget_forced(self) -> None:
        """Drops the forced faults not injected yet."""
        with self._lock:
            self._forced.clear()

    @property
    def injected(self) -> collections.Counter[Fault]:
        """How many times each fault was injected so far."""
        with self._lock:
            return collections.Counter(self._injected)

    @property
    def records(self) -> list[RequestRecord]:
        with self._lock:
            return list(self._records)

    def attempts(self, path: str, method: str = "GET") -> int:
        """How many requests for `path` (``/bucket/key``) reached the proxy."""
        return sum(1 for record in self.records if record.path == path and record.method == method)

    # ---- life cycle ----------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stops accepting, closes every client connection (ending stalls), and joins the threads."""
        self._stopping.set()
        self._acceptor.join(timeout=5)
        self._listener.close()
        with self._lock:
            connections = list(self._connections)
            threads = list(self._threads)
        for connection in connections:
            with contextlib.suppress(OSError):  # already closed by the peer
                connection.shutdown(socket.SHUT_RDWR)
        for thread in threads:
            thread.join(timeout=5)
        alive = [thread.name for thread in threads if thread.is_alive()]
        if alive:
            raise RuntimeError(f"fault proxy threads did not end: {alive}")

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ---- serving -------------------------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                connection, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return  # listener closed
            connection.settimeout(None)
            thread = threading.Thread(
                target=self._serve_connection, args=(connection,), name="fault-proxy-conn", daemon=True
            )
            with self._lock:
                self._connections.add(connection)
                self._threads = [t for t in self._threads if t.is_alive()]
                self._threads.append(thread)
            thread.start()

    def _serve_connection(self, connection: socket.socket) -> None:
        if self._tls is not None:
            # In this connection's thread, so that a slow handshake holds up no other client. The wrapped
            # socket replaces the plain one (which it detaches) among those that stop() shuts down.
            with self._lock:
                self._connections.discard(connection)
            try:
                connection = self._tls.wrap_socket(connection, server_side=True)
            except OSError:
                connection.close()
                return
            with self._lock:
                self._connections.add(connection)
        reader = connection.makefile("rb")
        try:
            while not self._stopping.is_set():
                head = self._read_head(reader)
                if head is None:
                    return
                request, length = head
                fault = self._choose_fault(request)
                if fault in _DURING_REQUEST:
                    reader.read(length // 2)
                    self._record(request, fault, 0)
                    return
                body = reader.read(length) if length else b""
                if not self._answer(connection, request, body, fault):
                    return
        except OSError:
            return  # the client went away, or stop() shut the socket
        finally:
            with self._lock:
                self._connections.discard(connection)
            reader.close()
            connection.close()

    def _read_head(self, reader: object) -> Optional[tuple[ProxiedRequest, int]]:
        """The request line and headers, and the length of the body still to read."""
        line = reader.readline(65537)  # type: ignore[attr-defined]
        if not line:
            return None
        method, target, _version = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
        headers: dict[str, str] = {}
        while True:
            header_line = reader.readline(65537).decode("latin-1")  # type: ignore[attr-defined]
            if header_line in ("\r\n", "\n", ""):
                break
            name, _, value = header_line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            # The CRT sends uploads with Content-Length; refuse a chunked body rather than guess.
            raise OSError("fault proxy: chunked request bodies are not supported")
        return ProxiedRequest(method, target, headers), int(headers.get("content-length", "0") or 0)

    def _choose_fault(self, request: ProxiedRequest) -> Optional[Fault]:
        with self._lock:
            if not self._eligible(request):
                return None
            if self._forced:
                return self._forced.popleft()
            if not self._rates:
                return None
            draw = self._rng.random()
            threshold = 0.0
            for fault in _DRAW_ORDER:
                threshold += self._rates.get(fault, 0.0)
                if draw < threshold:
                    return fault
            return None

    def _record(
        self, request: ProxiedRequest, fault: Optional[Fault], status: int, body: bytes = b""
    ) -> None:
        with self._lock:
            if fault is not None:
                self._injected[fault] += 1
            if not self.keep_records:
                return
            self._records.append(
                RequestRecord(
                    request.method,
                    request.path,
                    request.query,
                    request.headers.get("range", ""),
                    request.headers.get("if-match", ""),
                    fault,
                    status,
                    request.headers.get("if-none-match", ""),
                    dict(request.headers),
                    body if self.record_bodies else b"",
                    request.s3_operation,
                )
            )

    def _answer(
        self, connection: socket.socket, request: ProxiedRequest, body: bytes, fault: Optional[Fault]
    ) -> bool:
        """Answers one request (with `fault`, if any); returns whether the connection stays open."""
        if self.latency_s:
            self._stopping.wait(self.latency_s)
        if fault is Fault.FLIP_REQUEST_BYTE and body:
            middle = len(body) // 2
            body = body[:middle] + bytes([body[middle] ^ 0xFF]) + body[middle + 1 :]
        with self._lock:
            gate = self._gate
        refusal = gate(request) if gate is not None else None
        if refusal is not None:
            with self._lock:
                self._refused[refusal.code] += 1
            self._record(request, None, refusal.status)
            connection.sendall(_error_answer(refusal))
            return _keeps_alive(request)
        if fault in (Fault.DROP, Fault.NO_ANSWER):
            self._record(request, fault, 0)
            if fault is Fault.NO_ANSWER:
                self._stay_silent(connection)
            return False
        if fault in _ERROR_DOCUMENTS:
            answer = ErrorAnswer(*_ERROR_DOCUMENTS[fault])
            self._record(request, fault, answer.status)
            connection.sendall(_error_answer(answer))
            return _keeps_alive(request)

        status, reason, headers, payload = self._forward(request, body)
        length = len(payload)
        if request.method == "HEAD" or status in (204, 304):
            # No body on the wire, but Content-Length still describes the resource.
            length = int(dict((k.lower(), v) for k, v in headers).get("content-length", "0"))
            payload = b""
        if fault in _NEEDS_UPSTREAM and len(payload) < 2:
            fault = None  # nothing to cut: the answer goes through whole and no fault is counted
        head = _response_head(status, reason, headers, length)
        self._record(request, fault, status, body)
        if fault is Fault.SLOW_ANSWER:
            self._stopping.wait(self.slow_answer_s)
            fault = None  # then the whole answer
        if fault is None:
            connection.sendall(head + payload)
            return _keeps_alive(request)
        connection.sendall(head + payload[: len(payload) // 2])
        if fault is Fault.STALL_BODY:
            self._stay_silent(connection)
        return False  # the body is incomplete: this connection cannot carry another answer

    def _forward(self, request: ProxiedRequest, body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
        upstream = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=30)
        try:
            upstream.putrequest(request.method, request.target, skip_host=True, skip_accept_encoding=True)
            for name, value in request.headers.items():
                if name not in _HOP_BY_HOP:
                    upstream.putheader(name, value)
            if body or request.method in ("PUT", "POST"):
                upstream.putheader("Content-Length", str(len(body)))
            upstream.putheader("Connection", "close")
            upstream.endheaders(body or None)
            response = upstream.getresponse()
            payload = response.read()  # Content-Length, chunked or until close: http.client handles all
            headers = [
                (name, value) for name, value in response.getheaders() if name.lower() not in _HOP_BY_HOP
            ]
            if request.method == "HEAD":
                length = response.getheader("Content-Length")
                if length is not None:
                    headers.append(("Content-Length", length))
            return response.status, response.reason, headers, payload
        except (OSError, http.client.HTTPException) as error:
            message = f"fault proxy could not reach the upstream: {error}".encode()
            return 502, "Bad Gateway", [("Content-Type", "text/plain")], message
        finally:
            upstream.close()

    def _stay_silent(self, connection: socket.socket) -> None:
        """Sends nothing until stall_s passes, the client closes the connection, or the proxy stops."""
        deadline = time.monotonic() + self.stall_s
        # A selector, not select.select(): a process with many descriptors open gives sockets numbers past
        # select()'s limit of 1024.
        with selectors.DefaultSelector() as selector:
            selector.register(connection, selectors.EVENT_READ)
            while time.monotonic() < deadline and not self._stopping.is_set():
                if selector.select(0.1):
                    try:
                        if not connection.recv(65536):  # whatever else it sends meanwhile is discarded
                            return  # the client gave up and closed
                    except ssl.SSLWantReadError:
                        continue  # TLS bytes that made no application data yet
                    except OSError:
                        return


def _error_answer(answer: ErrorAnswer) -> bytes:
    document = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{answer.code}</Code><Message>{answer.message}</Message>"
        f"<RequestId>fault-proxy</RequestId></Error>"
    ).encode()
    head = _response_head(answer.status, answer.reason, [("Content-Type", "application/xml")], len(document))
    return head + document


def _response_head(status: int, reason: str, headers: list[tuple[str, str]], length: int) -> bytes:
    lines = [f"HTTP/1.1 {status} {reason}"]
    lines += [f"{name}: {value}" for name, value in headers if name.lower() not in _HOP_BY_HOP]
    lines.append(f"Content-Length: {length}")
    lines.append("Connection: keep-alive")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _keeps_alive(request: ProxiedRequest) -> bool:
    return request.headers.get("connection", "").lower() != "close"
