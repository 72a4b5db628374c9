"""An object of unknown size (a URL, no listing) is offered a result as large as the largest recent object;
if it fills at least half of that, it is received straight into it and read() returns it shortened to the
object's length: no copy in this process.

PrefetchWindow.landing_capacity_of, GetObjectRequest::landing_capacity and on_part_landing's decision. What
must hold: every object byte-exact whether it fits the guess, is smaller than half of it, larger than it,
empty or a part long; every way of reading it exact; a cut-off answer received again in place; a stream given
up while its object arrives never lets a CRT thread write into freed memory (the sanitizer run includes this
file). Every config here streams small objects (``small_object_bytes=0``): by default the loader yields them
whole once arrived (test_landed.py), before any of this could happen under a reader.
"""

from __future__ import annotations

import io
import random
import time
from collections.abc import Iterator

import pytest
from torch.utils.data.datapipes.iter import IterableWrapper

from tests.fault_proxy import Fault, FaultProxy, ProxiedRequest
from tests.integration.given_up import give_up
from tests.integration.ways_of_reading import chunks_kept_past_the_stream, into_a_buffer
from tests.s3_server import MotoServer
from torchdata_s3 import S3Config, S3FileLoader
from torchdata_s3.client import native_client

pytestmark = pytest.mark.integration

MIB = 1024 * 1024
PART = 8 * MIB
SIZE = 110_000
# Equal objects first, so that the later ones have a guess; then each case of the guess against the answer.
SIZES = [SIZE] * 6 + [SIZE - 1, SIZE // 3, 3 * SIZE, 1, 0, PART, SIZE]


def payload(seed: int, size: int) -> bytes:
    return random.Random(seed).randbytes(size)  # no repeats: a misplaced block cannot go unnoticed


@pytest.fixture
def objects(boto_s3, bucket: str) -> dict[str, bytes]:  # type: ignore[no-untyped-def]
    """The objects, by URL, in the order they are loaded."""
    stored = {}
    for seed, size in enumerate(SIZES):
        key = f"guessed/{seed:02d}-{size}"
        stored[f"s3://{bucket}/{key}"] = data = payload(seed, size)
        boto_s3.put_object(Bucket=bucket, Key=key, Body=data)
    return stored


@pytest.fixture
def proxy(moto_server: MotoServer, s3_endpoint: str) -> Iterator[FaultProxy]:
    with FaultProxy(moto_server.port, seed=5, stall_s=30) as running:
        yield running


def load(urls: list[str], config: S3Config) -> Iterator[tuple[str, io.BufferedIOBase]]:
    # One object ahead: each one after the second is requested once an earlier one's size is known.
    return iter(S3FileLoader(IterableWrapper(urls), config=config, prefetch=1))


def in_pieces(stream: io.BufferedIOBase) -> bytes:
    return b"".join(iter(lambda: stream.read(1 << 20), b""))


def whole(stream: io.BufferedIOBase) -> bytes:
    return stream.read()


def read_then_seek_back(stream: io.BufferedIOBase) -> bytes:
    first = stream.read()
    stream.seek(0)  # the bytes kept for seeking back point into the shortened result
    again = stream.read()
    assert again == first
    return first


READERS = {
    "read_pieces": in_pieces,
    "read": whole,
    "read_chunk_kept": chunks_kept_past_the_stream,
    "readinto": into_a_buffer,
    "read_then_seek_back": read_then_seek_back,
}


def has_hash_of_equal_bytes(data: bytes) -> bool:
    """A shortened result behaves as any bytes: equal and hashable like a copy of it."""
    return hash(data) == hash(bytes(bytearray(data))) and data == bytes(bytearray(data))


def test_objects_of_unknown_size_land_in_the_bytes_read_returns(
    bucket: str, objects: dict[str, bytes]
) -> None:
    config = S3Config.resolve(small_object_bytes=0, part_size_bytes=PART)
    client = native_client(config)
    landed_before = client.landed_bytes

    loaded = {url: in_pieces(stream) for url, stream in load(list(objects), config)}

    assert loaded == objects
    assert all(has_hash_of_equal_bytes(data) for data in loaded.values())
    # The equal objects from the third on (the loader learns a size when it hands the object out) and
    # SIZE - 1 fit the guess; the smaller ones fill under half of it, the larger ones do not fit, and after
    # the part-sized one no guess is small enough to offer.
    assert client.landed_bytes - landed_before == 4 * SIZE + (SIZE - 1)
    assert client.pinned_pool_bytes == 0


@pytest.mark.parametrize("reader", list(READERS))
def test_every_way_of_reading_a_guessed_landing_is_exact(
    bucket: str, objects: dict[str, bytes], reader: str
) -> None:
    config = S3Config.resolve(small_object_bytes=0, part_size_bytes=PART)

    for url, stream in load(list(objects), config):
        assert READERS[reader](stream) == objects[url], url


def is_a_guessed_get(request: ProxiedRequest) -> bool:
    """A GET of one of the equal objects requested with a guess (the third to the sixth)."""
    return request.is_get_object and any(
        f"/guessed/{seed:02d}-{SIZE}" in request.path for seed in (2, 3, 4, 5)
    )


def test_a_guessed_landing_cut_off_is_received_again_in_place(  # type: ignore[no-untyped-def]
    bucket: str, objects: dict[str, bytes], proxy: FaultProxy
) -> None:
    config = S3Config.resolve(small_object_bytes=0, endpoint_url=proxy.endpoint_url, part_size_bytes=PART)
    client = native_client(config)
    landed_before = client.landed_bytes
    proxy.force(Fault.CUT_BODY, 2, eligible=is_a_guessed_get)

    assert {url: stream.read() for url, stream in load(list(objects), config)} == objects

    assert proxy.injected == {Fault.CUT_BODY: 2}
    assert client.landed_bytes - landed_before == 4 * SIZE + (SIZE - 1)


@pytest.mark.parametrize("how", ["closed", "dropped"])
def test_a_stream_given_up_while_its_guessed_landing_arrives_lets_the_client_read_on(  # type: ignore[no-untyped-def]
    bucket: str, objects: dict[str, bytes], proxy: FaultProxy, how: str
) -> None:
    """Bodies stalled mid-way while the CRT writes into the guessed results: closing or dropping the streams
    must end those writes before the memory goes."""
    config = S3Config.resolve(
        small_object_bytes=0, endpoint_url=proxy.endpoint_url, part_size_bytes=PART, request_timeout_ms=20_000
    )
    urls = [url for url in objects if url.endswith(f"-{SIZE}")]
    proxy.force(Fault.STALL_BODY, 3, eligible=is_a_guessed_get)
    streams = list(load(urls, config))  # each yielded once its answer's head is in
    started = time.monotonic()

    give_up(streams, how)

    assert time.monotonic() - started < 15  # cancelled, not waited out (the proxy stalls for 30 s)
    proxy.forget_forced()
    assert {url: stream.read() for url, stream in load(urls, config)} == {url: objects[url] for url in urls}
