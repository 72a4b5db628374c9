"""A small HTTP proxy on loopback for the tests: CONNECT tunnels (how HTTPS goes through a proxy) and
forwarded plain-HTTP requests (absolute-form request lines, relayed as they are: nginx accepts them).

It only ever connects to 127.0.0.1 (anything else is refused with 403), records every request head it
receives, and relays bytes both ways until either side closes. One thread per client connection. For the
tests of a proxy that says no, it can demand Basic credentials (407 without them) or refuse every request
(403).
"""

from __future__ import annotations

import base64
import contextlib
import selectors
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Optional
from urllib.parse import urlsplit

_HEAD_LIMIT = 64 * 1024
_IDLE_LIMIT_S = 30.0  # a tunnel moving nothing for this long is closed: no thread outlives a test for long


class ConnectProxy:
    def __init__(self, *, credentials: Optional[tuple[str, str]] = None, refuse_all: bool = False) -> None:
        self._authorization = (
            "Basic " + base64.b64encode(f"{credentials[0]}:{credentials[1]}".encode()).decode()
            if credentials
            else None
        )
        self._refuse_all = refuse_all
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.requests: list[str] = []  # request lines, e.g. "CONNECT 127.0.0.1:443 HTTP/1.1"
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._open: set[socket.socket] = set()  # every socket a relay may be waiting on
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def request_lines(self) -> list[str]:
        with self._lock:
            return list(self.requests)

    def stop(self) -> None:
        """Stops accepting, cuts every open tunnel (clients keep idle connections) and joins the threads."""
        self._stopping.set()
        with contextlib.suppress(OSError):  # shutting down wakes the accept() in progress; closing does not
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._acceptor.join(timeout=5)
        with self._lock:
            for connection in self._open:
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)
        for thread in self._threads:
            thread.join(timeout=5)

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(client,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _track(self, connection: socket.socket, is_open: bool) -> None:
        with self._lock:
            if is_open:
                self._open.add(connection)
            else:
                self._open.discard(connection)

    def _serve(self, client: socket.socket) -> None:
        upstream: Optional[socket.socket] = None
        self._track(client, True)
        try:
            head = _read_head(client)
            if head is None:
                return
            request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
            with self._lock:
                self.requests.append(request_line)
            method, target, _ = request_line.split(" ", 2)
            if method == "CONNECT":
                host, _, port = target.rpartition(":")
            else:
                parts = urlsplit(target)
                host, port = parts.hostname or "", str(parts.port or 80)
            if (
                self._authorization is not None
                and _header(head, "proxy-authorization") != self._authorization
            ):
                client.sendall(
                    b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                    b'Proxy-Authenticate: Basic realm="test"\r\n'
                    b"Content-Length: 0\r\nConnection: close\r\n\r\n"
                )
                return
            if self._refuse_all or host.strip("[]") != "127.0.0.1":
                client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", int(port)), timeout=5)
                self._track(upstream, True)
            except OSError:
                client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            if method == "CONNECT":
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                upstream.sendall(head)
            _relay(client, upstream, self._stopping)
        except (OSError, ValueError):
            pass
        finally:
            self._track(client, False)
            client.close()
            if upstream is not None:
                self._track(upstream, False)
                upstream.close()


def _read_head(connection: socket.socket) -> Optional[bytes]:
    """The request head (through the blank line) and whatever followed it in the same reads."""
    connection.settimeout(10)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(4096)
        if not chunk or len(data) > _HEAD_LIMIT:
            return None
        data += chunk
    return data


def _header(head: bytes, name: str) -> Optional[str]:
    for line in head.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]:
        key, _, value = line.decode("latin-1").partition(":")
        if key.strip().lower() == name:
            return value.strip()
    return None


def _relay(a: socket.socket, b: socket.socket, stopping: threading.Event) -> None:
    for side in (a, b):
        side.settimeout(None)
    peers = {a: b, b: a}
    with selectors.DefaultSelector() as selector:  # select.select() fails on descriptors past 1024
        for side in (a, b):
            selector.register(side, selectors.EVENT_READ)
        while not stopping.is_set():
            ready = selector.select(_IDLE_LIMIT_S)
            if not ready:
                return
            for key, _events in ready:
                data = key.fileobj.recv(256 * 1024)  # type: ignore[union-attr]
                if not data:
                    return
                peers[key.fileobj].sendall(data)  # type: ignore[index]


@contextmanager
def connect_proxy(
    *, credentials: Optional[tuple[str, str]] = None, refuse_all: bool = False
) -> Iterator[ConnectProxy]:
    proxy = ConnectProxy(credentials=credentials, refuse_all=refuse_all)
    try:
        yield proxy
    finally:
        proxy.stop()
