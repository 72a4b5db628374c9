"""Each error class, produced by real servers and sockets (no mocks)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from torch.utils.data.datapipes.iter import IterableWrapper

from tests.s3_server import MotoServer, free_loopback_port
from torchdata_s3 import (
    InvalidS3UrlError,
    S3Client,
    S3Config,
    S3FileLister,
    S3FileLoader,
    S3FileNotFoundError,
    S3NetworkError,
    S3PermissionError,
    S3TimeoutError,
)

pytestmark = pytest.mark.integration


def first_stream_read(url: str, **options: object) -> bytes:
    [(_url, stream)] = list(S3FileLoader(IterableWrapper([url]), **options))
    return stream.read()


def test_missing_key(bucket: str) -> None:
    with pytest.raises(S3FileNotFoundError, match=rf"s3://{bucket}/absent.*NoSuchKey.*HTTP 404") as caught:
        first_stream_read(f"s3://{bucket}/absent")
    assert (caught.value.s3_error_code, caught.value.http_status) == ("NoSuchKey", 404)
    assert caught.value.url == f"s3://{bucket}/absent"


def test_missing_bucket(s3_endpoint: str) -> None:
    with pytest.raises(S3FileNotFoundError, match="NoSuchBucket"):
        first_stream_read("s3://absent-bucket/key")


@pytest.mark.parametrize("url", ["", "s3://", "s3:///key", "gs://bucket/key", "bucket/key"])
def test_malformed_urls(s3_endpoint: str, url: str) -> None:
    with pytest.raises(InvalidS3UrlError):
        first_stream_read(url)


@pytest.fixture(scope="module")
def authenticating_server() -> Iterator[MotoServer]:
    server = MotoServer(extra_env={"INITIAL_NO_AUTH_ACTION_COUNT": "0"})  # moto checks every signature
    try:
        yield server
    finally:
        server.stop()


def test_unknown_credentials_are_a_permission_error(authenticating_server: MotoServer) -> None:
    config = S3Config(
        endpoint_url=authenticating_server.endpoint_url,
        access_key_id="AKIAUNKNOWNKEY000000",
        secret_access_key="not-the-secret-value",
    )
    with pytest.raises(S3PermissionError, match=r"s3://any-bucket/key.*HTTP 403") as caught:
        S3Client(config).open("s3://any-bucket/key").read()
    assert "not-the-secret-value" not in str(caught.value)
    with pytest.raises(S3PermissionError, match="HTTP 403"):
        list(S3FileLister(IterableWrapper(["s3://any-bucket/"]), config=config))


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
