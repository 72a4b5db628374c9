"""A TCP relay on loopback that flips one bit of what a TLS server sends, well after the handshake: a record
that no longer authenticates, which is what a timing attack on record decryption sends (Lucky 13).

It relays bytes both ways, unchanged, between each client connection and the server behind it, except that in
the first connection whose server-to-client stream passes `tamper_at` bytes, the byte at that offset has its
lowest bit flipped. It records when that byte went out and when the client then closed its side of that
connection: what an attacker on the path sees, and what s2n's blinding delay is meant to spread.
One thread per direction per connection; every socket is closed by `stop()`.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import Optional

_CHUNK = 64 * 1024


class TamperingRelay:
    def __init__(self, server_port: int, *, tamper_at: int) -> None:
        self._server_port = server_port
        self._tamper_at = tamper_at
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._tampered_once = False
        self.connections = 0
        self.tampered_at: Optional[float] = None  # time.monotonic() when the flipped byte was sent
        self.client_closed_at: Optional[float] = None  # ... and when that connection's client then closed
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    @property
    def endpoint_url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def wait_for_the_tampered_close(self, timeout_s: float) -> Optional[float]:
        """Seconds from the flipped byte to the client's close of that connection; None if it stayed open."""
        if not self._closed.wait(timeout_s):
            return None
        assert self.tampered_at is not None and self.client_closed_at is not None
        return self.client_closed_at - self.tampered_at

    def stop(self) -> None:
        with contextlib.suppress(OSError):  # wakes the accept() in progress
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            sockets = list(self._sockets)
        for each in sockets:
            with contextlib.suppress(OSError):
                each.shutdown(socket.SHUT_RDWR)
            each.close()
        for thread in [self._acceptor, *self._threads]:
            thread.join(timeout=5)

    def __enter__(self) -> TamperingRelay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self._server_port))
            # Set by the server-to-client thread when it flips this connection's byte.
            tamper = {"this": False}
            with self._lock:
                self.connections += 1
                self._sockets += [client, server]
                threads = [
                    threading.Thread(target=self._to_client, args=(server, client, tamper), daemon=True),
                    threading.Thread(target=self._to_server, args=(client, server, tamper), daemon=True),
                ]
                self._threads += threads
            for thread in threads:
                thread.start()

    def _to_client(self, server: socket.socket, client: socket.socket, tamper: dict[str, bool]) -> None:
        sent = 0
        with contextlib.suppress(OSError):
            while data := server.recv(_CHUNK):
                if sent <= self._tamper_at < sent + len(data):
                    with self._lock:
                        tamper["this"] = not self._tampered_once
                        self._tampered_once = True
                    if tamper["this"]:
                        offset = self._tamper_at - sent
                        data = data[:offset] + bytes([data[offset] ^ 1]) + data[offset + 1 :]
                        client.sendall(data)
                        self.tampered_at = time.monotonic()
                        sent += len(data)
                        continue
                client.sendall(data)
                sent += len(data)
        with contextlib.suppress(OSError):
            client.shutdown(socket.SHUT_WR)

    def _to_server(self, client: socket.socket, server: socket.socket, tamper: dict[str, bool]) -> None:
        with contextlib.suppress(OSError):
            while data := client.recv(_CHUNK):
                server.sendall(data)
        # The client closed (or reset) its side.
        if tamper["this"]:
            self.client_closed_at = time.monotonic()
            self._closed.set()
        with contextlib.suppress(OSError):
            server.shutdown(socket.SHUT_WR)
