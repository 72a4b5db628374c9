"""Bytes the endpoint sent, read from nginx's access log: one line per request, ``<status> <body bytes>``
(and, on an endpoint with writes, ``<request bytes>``: what it received, request line and headers included).

The same count for every client, taken on the server's side: what a client fetched, not what it says it
read. A measurement's share is the log's lines between two offsets (its window).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

LOG_FORMAT = "$status $body_bytes_sent"
"""What each line holds; nginx_config writes it, :meth:`AccessLog.since` parses it."""
WRITES_LOG_FORMAT = "$status $body_bytes_sent $request_length"
"""The same with what each request brought in (uploads), for an endpoint with writes."""

# nginx logs a request when it ends; one the client abandoned (a cancelled ranged GET) ends when nginx
# notices the closed connection, a moment after the client's process has exited. So a window closes once
# the log has stopped growing for SETTLE_S, waiting at most MAX_WAIT_S.
SETTLE_S = 0.1
MAX_WAIT_S = 2.0


@dataclass(frozen=True)
class Served:
    requests: int
    body_bytes: int
    request_bytes: int = 0
    """Received: request lines, headers and bodies (0 unless the endpoint has writes)."""


class AccessLog:
    def __init__(self, path: Path) -> None:
        self.path = path

    def offset(self) -> int:
        """Where the next request's line will start: a window's opening mark."""
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def since(self, start: int) -> Served:
        """The requests logged from offset ``start`` on, once the log has settled."""
        deadline = time.monotonic() + MAX_WAIT_S
        size = self.offset()
        while time.monotonic() < deadline:
            time.sleep(SETTLE_S)
            now = self.offset()
            if now == size:
                break
            size = now
        with open(self.path, "rb") as log:
            log.seek(start)
            text = log.read(size - start).decode()
        requests = body_bytes = request_bytes = 0
        for line in text.splitlines():
            _status, sent, *received = line.split()
            requests += 1
            body_bytes += int(sent)
            request_bytes += int(received[0]) if received else 0
        return Served(requests, body_bytes, request_bytes)
