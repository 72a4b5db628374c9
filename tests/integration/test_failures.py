"""Network failures and timeouts, produced by real sockets (no mocks). Missing objects and malformed input:
test_bad_input.py; credentials and permissions: test_credentials.py."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from tests.s3_server import free_loopback_port
from torchdata_s3 import S3Client, S3Config, S3NetworkError, S3TimeoutError

pytestmark = pytest.mark.integration


def test_connection_refused_is_a_network_error() -> None:
    port = free_loopback_port()  # nothing listens there
    config = S3Config(endpoint_url=f"http://127.0.0.1:{port}", max_retries=1, request_timeout_ms=20_000)
    started = time.monotonic()
    with pytest.raises(S3NetworkError, match=r"s3://bucket/key.*AWS_IO_SOCKET_CONNECTION_REFUSED"):
        S3Client(config).open("s3://bucket/key").read()
    assert time.monotonic() - started < 20


@pytest.fixture
def silent_server() -> Iterator[int]:
    """Accepts connections and reads requests but never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    stop = threading.Event()
    held = []

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                continue
            held.append(connection)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=5)
        for connection in held:
            connection.close()
        listener.close()


def test_unresponsive_endpoint_times_out(silent_server: int) -> None:
    config = S3Config(endpoint_url=f"http://127.0.0.1:{silent_server}", request_timeout_ms=1500)
    started = time.monotonic()
    with pytest.raises(S3TimeoutError, match=r"s3://bucket/key.*request_timeout_ms") as caught:
        S3Client(config).open("s3://bucket/key").read()
    elapsed = time.monotonic() - started
    assert isinstance(caught.value, TimeoutError)
    assert 1.0 < elapsed < 10, elapsed


def test_unresponsive_endpoint_times_out_while_listing(silent_server: int) -> None:
    config = S3Config(endpoint_url=f"http://127.0.0.1:{silent_server}", request_timeout_ms=1500)
    with pytest.raises(S3TimeoutError, match="ListObjectsV2 s3://bucket/"):
        list(S3Client(config).list_objects("s3://bucket/"))
