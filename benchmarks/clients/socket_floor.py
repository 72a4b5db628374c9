"""The floor of CPU per GB for reading an object: one socket, one GET after another, each body received with
recv_into a reused 1 MiB buffer (the kernel's copy and nothing else: no parsing past the headers, no result
object, no signing). Unsigned requests, so the embedded endpoint only, like raw-http. Issue 22 asks ours' CPU
per GB to stay within 1.5x this row, measured in the same run."""

from __future__ import annotations

import socket
import zlib
from urllib.parse import urlsplit

from .common import READ_SIZE, Context, Digest, Measurement, Stopwatch

NAME = "socket-floor"
CONFIGURATION = "one keep-alive socket, GET after GET, socket.recv_into a reused 1 MiB buffer"


def _headers(connection: socket.socket, buffer: bytearray) -> tuple[int, bytes]:
    """Reads up to the blank line; returns the Content-Length and the body bytes that came with the head."""
    received = b""
    while b"\r\n\r\n" not in received:
        count = connection.recv_into(buffer)
        if count == 0:
            raise ConnectionError("the endpoint closed the connection inside the headers")
        received += bytes(buffer[:count])
    head, _, rest = received.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0]
    if b" 200 " not in status + b" ":
        raise RuntimeError(f"the endpoint answered {status!r}")
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value), rest
    raise RuntimeError("the answer has no Content-Length")


def fetch_into_ring(ctx: Context, ring_bytes: int) -> Measurement:
    """Every object's body received into READ_SIZE blocks, each filled before the next buffer of a ring of
    `ring_bytes` is (one block: the same buffer every time, hot in the cache)."""
    digest = Digest(ctx.verify)
    ring = [memoryview(bytearray(READ_SIZE)) for _ in range(max(1, ring_bytes // READ_SIZE))]
    buffer = bytearray(READ_SIZE)  # the headers'
    blocks = filled = objects = total = 0
    first = urlsplit(ctx.http_urls()[0])
    with socket.create_connection((first.hostname, first.port or 80)) as connection, Stopwatch() as watch:
        for url in ctx.http_urls():
            path = urlsplit(url).path
            connection.sendall(f"GET {path} HTTP/1.1\r\nHost: {first.netloc}\r\n\r\n".encode())
            length, body = _headers(connection, buffer)
            crc = zlib.crc32(body) if digest.enabled else 0
            remaining = length - len(body)
            while remaining:
                if filled == READ_SIZE:
                    blocks, filled = blocks + 1, 0
                view = ring[blocks % len(ring)][filled:]
                count = connection.recv_into(view, min(remaining, len(view)))
                if count == 0:
                    raise ConnectionError(f"the endpoint closed the connection inside the body of {url}")
                if digest.enabled:
                    crc = zlib.crc32(view[:count], crc)
                filled += count
                remaining -= count
            if digest.enabled:
                digest.add(crc)
            total += length
            objects += 1
    return Measurement(objects, total, watch.seconds, digest.value(), watch.cpu_seconds)


def _fetch(ctx: Context) -> Measurement:
    return fetch_into_ring(ctx, READ_SIZE)


large = _fetch
small = _fetch
whole = _fetch
