"""A TCP relay on loopback that paces what clients send, per connection: S3's per-connection upload rate.

nginx paces responses (``limit_rate``) but has no limit on request bodies, and this kernel has no per-flow
qdisc (``netem``, ``fq``); so for the ``s3like`` profile with writes, clients connect here and the relay
forwards to nginx. Each accepted connection gets two threads:

* client -> nginx: bytes move through a pipe with ``os.splice`` (never copied into Python), at most
  ``rate`` bytes/s, by a token bucket holding at most ``BURST_BYTES`` (so a connection idle between
  requests does not save up a burst), in steps of up to ``STEP_BYTES``;
* nginx -> client: unpaced (nginx already paces responses), also by ``splice``.

TLS passes through untouched (the relay sees only bytes). When either side closes, the relay half-closes
the other, and a connection is dropped whole on a reset.

Run it as ``python -m benchmarks.endpoint.pacing_relay --target-port N --rate BYTES_PER_S``; it binds a free
127.0.0.1 port and prints ``listening on http://127.0.0.1:<port>`` once it accepts connections.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import socket
import sys
import threading
import time
from typing import Optional

LOOPBACK_HOST = "127.0.0.1"

BURST_BYTES = 256 * 1024
"""The token bucket's depth: what a connection may send at once after being idle (2.9 ms at 90 MB/s), so
a 5 MiB part on a reused connection goes at most 5 % faster than the rate."""
STEP_BYTES = 1024 * 1024
"""The most moved per splice round: a step beyond the credit first waits for it. 1 MiB rather than 256 KiB
cut the relay's CPU per GB by a quarter (measured 0.34 vs 0.44 s per GiB, unpaced, 8 connections)."""
_PIPE_BYTES = 1024 * 1024  # Linux's default pipe-max-size: one step fits
_SPLICE_MOVE = getattr(os, "SPLICE_F_MOVE", 1)
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


class TokenBucket:
    """``rate`` bytes/s with at most ``depth`` bytes of credit; :meth:`take` sleeps until there is enough."""

    def __init__(self, rate: float, depth: int) -> None:
        self.rate, self.depth = rate, depth
        self._credit = float(depth)
        self._updated = time.monotonic()

    def take(self, count: int) -> None:
        """Wait until ``count`` bytes may go (beyond the credit: as long as the rest takes at ``rate``), and
        spend them."""
        now = time.monotonic()
        self._credit = min(self.depth, self._credit + (now - self._updated) * self.rate)
        self._updated = now
        self._credit -= count
        if self._credit < 0:
            time.sleep(-self._credit / self.rate)


def relay(source: socket.socket, target: socket.socket, bucket: Optional[TokenBucket]) -> None:
    """Move bytes from ``source`` to ``target`` until ``source`` ends (then half-close ``target``) or either
    fails (then shut both down, which also wakes the thread relaying the other way)."""
    # Python < 3.10 has no os.splice: the same, with a copy through a buffer.
    channel = _PipeChannel(source, target) if hasattr(os, "splice") else _BufferChannel(source, target)
    try:
        while True:
            count = channel.receive()
            if count == 0:
                with contextlib.suppress(OSError):
                    target.shutdown(socket.SHUT_WR)
                return
            if bucket is not None:
                bucket.take(count)
            channel.send(count)
    except OSError:
        for side in (source, target):
            with contextlib.suppress(OSError):
                side.shutdown(socket.SHUT_RDWR)
    finally:
        channel.close()


class _PipeChannel:
    """Up to STEP_BYTES from ``source`` into a pipe, then from the pipe to ``target``: never copied into
    Python."""

    def __init__(self, source: socket.socket, target: socket.socket) -> None:
        self._source, self._target = source.fileno(), target.fileno()
        self._read_end, self._write_end = os.pipe()
        with contextlib.suppress(OSError):  # a smaller pipe only means more calls
            fcntl.fcntl(self._write_end, _F_SETPIPE_SZ, _PIPE_BYTES)

    def receive(self) -> int:
        return os.splice(self._source, self._write_end, STEP_BYTES, flags=_SPLICE_MOVE)

    def send(self, count: int) -> None:
        while count:
            count -= os.splice(self._read_end, self._target, count, flags=_SPLICE_MOVE)

    def close(self) -> None:
        os.close(self._read_end)
        os.close(self._write_end)


class _BufferChannel:
    """Up to STEP_BYTES from ``source`` into a buffer, then to ``target``."""

    def __init__(self, source: socket.socket, target: socket.socket) -> None:
        self._source, self._target = source, target
        self._buffer = memoryview(bytearray(STEP_BYTES))

    def receive(self) -> int:
        return self._source.recv_into(self._buffer)

    def send(self, count: int) -> None:
        self._target.sendall(self._buffer[:count])

    def close(self) -> None:
        pass


class PacingRelay:
    """Accepts on ``127.0.0.1:<port>`` (``port=0``: a free one) and relays each connection to
    ``127.0.0.1:target_port``, pacing the client's bytes to ``rate`` bytes/s per connection."""

    def __init__(self, target_port: int, rate: float, port: int = 0) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be > 0 bytes/s, got {rate}")
        self.target_port, self.rate = target_port, rate
        self.listener = socket.create_server((LOOPBACK_HOST, port), backlog=256)

    @property
    def port(self) -> int:
        return self.listener.getsockname()[1]

    def serve_forever(self) -> None:
        while True:
            client, _ = self.listener.accept()
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection((LOOPBACK_HOST, self.target_port))
        except OSError:
            client.close()
            return
        for side in (client, upstream):
            side.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        answers = threading.Thread(target=relay, args=(upstream, client, None), daemon=True)
        answers.start()
        relay(client, upstream, TokenBucket(self.rate, BURST_BYTES))
        answers.join()
        client.close()
        upstream.close()


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--target-port", type=int, required=True, help="nginx's port on 127.0.0.1")
    parser.add_argument("--rate", type=float, required=True, help="bytes/s per connection, client -> nginx")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default 0: a free one)")
    arguments = parser.parse_args(argv)
    relay_server = PacingRelay(arguments.target_port, arguments.rate, arguments.port)
    print(f"listening on http://{LOOPBACK_HOST}:{relay_server.port}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        relay_server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
