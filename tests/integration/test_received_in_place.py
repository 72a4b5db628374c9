"""A GET part's body is read from the socket straight into its part buffer (no copy out of a channel message).

The CRT patch "a GET part's body bytes are read from the socket straight into its buffer"
(cmake/AwsCrtPatches.cmake); _core.bytes_received_in_place() counts the bytes that took that path. What must
hold around it: every byte exact whichever path it took (also through retries of bodies cut short, and when a
part lands in a whole read()'s result), nothing received in place over TLS (the TLS handler sits between the
socket and HTTP), and no write into memory that was given back (the sanitizer run includes this file).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from torch.utils.data.datapipes.iter import IterableWrapper

from tests.fault_proxy import Fault, FaultProxy, ProxiedRequest
from tests.s3_server import MotoServer
from torchdata_s3 import S3Config, S3FileLoader, _core

pytestmark = pytest.mark.integration

MIB = 1024 * 1024
PART = 8 * MIB
OBJECT_SIZE = 3 * PART - 12345  # the last part short


def payload(seed: int, size: int = OBJECT_SIZE) -> bytes:
    return random.Random(seed).randbytes(size)  # no repeats: a misplaced block cannot go unnoticed


def read_in_pieces(url: str, config: S3Config, piece: int = MIB) -> bytes:
    [(_url, stream)] = list(S3FileLoader(IterableWrapper([url]), config=config))
    chunks = []
    while chunk := stream.read(piece):
        chunks.append(chunk)
    return b"".join(chunks)


@pytest.fixture
def proxy(moto_server: MotoServer, s3_endpoint: str) -> Iterator[FaultProxy]:
    with FaultProxy(moto_server.port, seed=5, stall_s=30) as running:
        yield running


def test_most_of_a_large_body_is_received_in_place(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    data = payload(seed=1)
    boto_s3.put_object(Bucket=bucket, Key="obj", Body=data)
    before = _core.bytes_received_in_place()

    assert read_in_pieces(f"s3://{bucket}/obj", S3Config.resolve(part_size_bytes=PART)) == data

    in_place = _core.bytes_received_in_place() - before
    # Each part's first message (headers and its first body bytes, at most 256 KiB) is copied as before; so is
    # a message that arrives while an earlier one still waits to be decoded. The rest is received in place.
    assert OBJECT_SIZE // 2 <= in_place <= OBJECT_SIZE


def test_a_small_object_is_received_in_place_after_its_head(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    """A single-part object's head is read alone (at most 2 KiB), so its body goes to its place, not through a
    message: what a dataset of small objects pays per byte."""
    size = 110_000
    objects = {f"small/{number:02d}": payload(seed=100 + number, size=size) for number in range(20)}
    for key, data in objects.items():
        boto_s3.put_object(Bucket=bucket, Key=key, Body=data)
    before = _core.bytes_received_in_place()

    urls = [f"s3://{bucket}/{key}" for key in objects]
    loaded = {
        url: stream.read() for url, stream in S3FileLoader(IterableWrapper(urls), config=S3Config.resolve())
    }

    assert loaded == {f"s3://{bucket}/{key}": data for key, data in objects.items()}
    in_place = _core.bytes_received_in_place() - before
    assert len(objects) * (size - 2048) <= in_place <= len(objects) * size


@pytest.mark.parametrize("read_bytes", [4096, 16 * 1024, 4 * MIB])
def test_every_socket_read_size_gives_every_byte(boto_s3, bucket: str, read_bytes: int) -> None:  # type: ignore[no-untyped-def]
    """A client socket is read up to 256 KiB per event-loop tick (upstream: 16 KiB; the CRT patch "a client
    socket's read size per event-loop tick is the channel fragment size"). Below the 2 KiB a head comes in, at
    upstream's size and far above a message: the same bytes, received in place or not, in pieces or whole."""
    data = payload(seed=7)
    small = payload(seed=8, size=110_000)
    boto_s3.put_object(Bucket=bucket, Key="obj", Body=data)
    boto_s3.put_object(Bucket=bucket, Key="small", Body=small)
    previous = _core.set_client_socket_read_size(read_bytes)
    try:
        assert _core.set_client_socket_read_size(0) == read_bytes  # 0 only asks
        # A client of its own, so that every connection it makes is made at this size.
        config = S3Config.resolve(part_size_bytes=PART, max_connections=3 + read_bytes % 7)
        before = _core.bytes_received_in_place()
        assert read_in_pieces(f"s3://{bucket}/obj", config) == data
        assert read_in_pieces(f"s3://{bucket}/small", config, piece=-1) == small
        assert _core.bytes_received_in_place() - before >= (OBJECT_SIZE + len(small)) // 2
    finally:
        _core.set_client_socket_read_size(previous)
    assert _core.set_client_socket_read_size(0) == previous


def test_turned_off_every_byte_is_copied_as_upstream_does(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    """The switch the benchmark's copying variant uses; also shows the counter above counts only this path."""
    data = payload(seed=4)
    boto_s3.put_object(Bucket=bucket, Key="obj", Body=data)
    _core.set_receive_in_place(False)
    try:
        before = _core.bytes_received_in_place()
        assert read_in_pieces(f"s3://{bucket}/obj", S3Config.resolve(part_size_bytes=PART)) == data
        assert _core.bytes_received_in_place() == before
    finally:
        _core.set_receive_in_place(True)


# Bodies under half a part, asked for before their size is known, go to memory of their own size instead of a
# part-sized pool buffer (on_part_landing): the sizes around that line, and a last part of a few bytes.
@pytest.mark.parametrize(
    "size",
    [0, 1, 256 * 1024 - 1, 256 * 1024 + 1, PART // 2 - 1, PART // 2, PART, PART + 1, 2 * PART + 1000],
)
def test_every_size_comes_back_byte_exact(boto_s3, bucket: str, size: int) -> None:  # type: ignore[no-untyped-def]
    data = payload(seed=size, size=size)
    boto_s3.put_object(Bucket=bucket, Key="obj", Body=data)
    config = S3Config.resolve(part_size_bytes=PART)
    assert read_in_pieces(f"s3://{bucket}/obj", config, piece=333_333) == data


def test_a_whole_read_lands_parts_received_in_place(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    """Parts landing in read()'s result (test_landing.py) take the in-place path into that result."""
    data = payload(seed=2)
    boto_s3.put_object(Bucket=bucket, Key="obj", Body=data)
    config = S3Config.resolve(part_size_bytes=PART, read_window_bytes=PART)
    before = _core.bytes_received_in_place()
    [(_url, stream)] = list(S3FileLoader(IterableWrapper([f"s3://{bucket}/obj"]), config=config))

    assert stream.read() == data
    assert _core.bytes_received_in_place() > before


def later_part(request: ProxiedRequest) -> bool:
    """A GET of a part after the first (the CRT sends those with If-Match)."""
    return request.is_get_object and "if-match" in request.headers


def test_bodies_cut_short_are_retried_byte_exact(proxy: FaultProxy, bucket: str, boto_s3) -> None:  # type: ignore[no-untyped-def]
    """A connection closed halfway through a body received in place: the part is asked for again, and the
    half it had is neither kept nor counted twice."""
    data = payload(seed=3)
    boto_s3.put_object(Bucket=bucket, Key="obj", Body=data)
    config = S3Config.resolve(part_size_bytes=PART, endpoint_url=proxy.endpoint_url)
    proxy.force(Fault.CUT_BODY, 2, eligible=later_part)

    assert read_in_pieces(f"s3://{bucket}/obj", config) == data
    assert proxy.injected == {Fault.CUT_BODY: 2}


def test_a_small_body_cut_short_is_retried_byte_exact(proxy: FaultProxy, bucket: str, boto_s3) -> None:  # type: ignore[no-untyped-def]
    """A small object of unknown size is received into memory of its own size; cut halfway, it is asked for
    again and received into that memory once more."""
    data = payload(seed=7, size=110_000)
    boto_s3.put_object(Bucket=bucket, Key="obj", Body=data)
    config = S3Config.resolve(part_size_bytes=PART, endpoint_url=proxy.endpoint_url)
    proxy.force(Fault.CUT_BODY, 2)

    assert read_in_pieces(f"s3://{bucket}/obj", config) == data
    assert proxy.injected == {Fault.CUT_BODY: 2}
