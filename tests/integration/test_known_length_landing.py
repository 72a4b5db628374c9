"""A GET whose length is known before it starts (an object whose size a listing gave, a byte range), no larger
than a part, is received straight into the `bytes` that read() of all of it returns: its bytes are never
copied in this process.

PyObjectStream.start / ObjectStream::start(result_memory). The memory is lent to the CRT from the GET's
start, so what must hold is about its life: every way of reading such a stream is exact, a Buffer from
read_chunk() keeps the memory alive after the stream is gone, and a stream closed, dropped or failed while its
object is still arriving never lets a CRT thread write into freed memory (the sanitizer run includes this
file). Every config here streams small objects (``small_object_bytes=0``): by default the loader yields them
whole once arrived (test_landed.py), before any of this could happen under a reader.
"""

from __future__ import annotations

import io
import random
import time
from collections.abc import Callable, Iterator

import pytest
from torch.utils.data.datapipes.iter import IterableWrapper

from tests.fault_proxy import Fault, FaultProxy, ProxiedRequest
from tests.integration.given_up import give_up
from tests.integration.ways_of_reading import chunks_kept_past_the_stream, into_a_buffer
from tests.s3_server import MotoServer
from torchdata_s3 import S3Client, S3Config, S3FileLoader, S3NetworkError
from torchdata_s3.client import native_client
from torchdata_s3.url import S3Url

pytestmark = pytest.mark.integration

MIB = 1024 * 1024
PART = 8 * MIB
SIZES = {"listed/a-byte": 1, "listed/image": 110_000, "listed/a-part": PART}


def payload(seed: int, size: int) -> bytes:
    return random.Random(seed).randbytes(size)  # no repeats: a misplaced block cannot go unnoticed


@pytest.fixture
def proxy(moto_server: MotoServer, s3_endpoint: str) -> Iterator[FaultProxy]:
    with FaultProxy(moto_server.port, seed=11, stall_s=30) as running:
        yield running


@pytest.fixture
def listed(boto_s3, bucket: str) -> dict[str, bytes]:  # type: ignore[no-untyped-def]
    """The objects under `listed/`, by URL."""
    objects = {key: payload(seed, size) for seed, (key, size) in enumerate(SIZES.items())}
    for key, data in objects.items():
        boto_s3.put_object(Bucket=bucket, Key=key, Body=data)
    return {f"s3://{bucket}/{key}": data for key, data in objects.items()}


def has_a_body_to_cut(request: ProxiedRequest) -> bool:
    """A GET whose answer has a half to send before a fault (the proxy cannot cut a 1-byte body)."""
    return request.is_get_object and not request.path.endswith("/a-byte")


def load_prefix(bucket: str, config: S3Config) -> Iterator[tuple[str, io.BufferedIOBase]]:
    return iter(S3FileLoader(IterableWrapper([f"s3://{bucket}/listed/"]), config=config))


def test_a_listed_object_is_received_into_the_bytes_read_returns(
    bucket: str, listed: dict[str, bytes]
) -> None:
    config = S3Config.resolve(small_object_bytes=0, part_size_bytes=PART)
    client = native_client(config)
    landed_before = client.landed_bytes

    loaded = {url: stream.read() for url, stream in load_prefix(bucket, config)}

    assert loaded == listed
    assert client.landed_bytes - landed_before == sum(SIZES.values())
    assert client.pinned_pool_bytes == 0


def in_pieces(stream: io.BufferedIOBase) -> bytes:
    return b"".join(iter(lambda: stream.read(40_000), b""))


def lines(stream: io.BufferedIOBase) -> bytes:
    return b"".join(stream)


def a_byte_then_the_rest(stream: io.BufferedIOBase) -> bytes:
    return stream.read(1) + stream.read()


def skipped_ahead(stream: io.BufferedIOBase) -> bytes:
    stream.seek(stream.size // 3)  # type: ignore[attr-defined]
    return b"\0" * (stream.size // 3) + stream.read()  # type: ignore[attr-defined]


READERS: dict[str, Callable[[io.BufferedIOBase], bytes]] = {
    "read_pieces": in_pieces,
    "readinto": into_a_buffer,
    "read_chunk_kept": chunks_kept_past_the_stream,
    "lines": lines,
    "a_byte_then_the_rest": a_byte_then_the_rest,
    "seek_ahead": skipped_ahead,
}


@pytest.mark.parametrize("reader", list(READERS))
def test_every_way_of_reading_a_landing_object_is_exact(
    bucket: str, listed: dict[str, bytes], reader: str
) -> None:
    config = S3Config.resolve(small_object_bytes=0, part_size_bytes=PART)

    for url, stream in load_prefix(bucket, config):
        expected = listed[url]
        if reader == "seek_ahead":
            expected = b"\0" * (len(expected) // 3) + expected[len(expected) // 3 :]
        assert READERS[reader](stream) == expected, url


@pytest.mark.parametrize("how", ["closed", "dropped"])
def test_a_stream_given_up_while_its_object_arrives_lets_the_client_read_on(  # type: ignore[no-untyped-def]
    bucket: str, listed: dict[str, bytes], proxy: FaultProxy, how: str
) -> None:
    """Bodies stalled mid-way: the CRT's connections are still writing into the streams' memory when the
    reader gives them up. Closing or dropping must end those writes before the memory goes."""
    config = S3Config.resolve(
        small_object_bytes=0, endpoint_url=proxy.endpoint_url, part_size_bytes=PART, request_timeout_ms=20_000
    )
    proxy.force(Fault.STALL_BODY, len(listed) - 1, eligible=has_a_body_to_cut)
    streams = list(load_prefix(bucket, config))  # each yielded once its answer's head is in
    assert proxy.injected == {Fault.STALL_BODY: len(listed) - 1}
    started = time.monotonic()

    give_up(streams, how)

    assert time.monotonic() - started < 15  # cancelled, not waited out (the proxy stalls for 30 s)

    proxy.forget_forced()
    assert {url: stream.read() for url, stream in load_prefix(bucket, config)} == listed


def test_a_landing_object_cut_off_is_received_again_in_place(  # type: ignore[no-untyped-def]
    bucket: str, listed: dict[str, bytes], proxy: FaultProxy
) -> None:
    config = S3Config.resolve(small_object_bytes=0, endpoint_url=proxy.endpoint_url, part_size_bytes=PART)
    client = native_client(config)
    landed_before = client.landed_bytes
    proxy.force(Fault.CUT_BODY, 2, eligible=has_a_body_to_cut)

    assert {url: stream.read() for url, stream in load_prefix(bucket, config)} == listed

    assert proxy.injected == {Fault.CUT_BODY: 2}
    assert client.landed_bytes - landed_before == sum(SIZES.values())


def test_a_landing_read_that_fails_raises_typed_and_the_client_reads_on(  # type: ignore[no-untyped-def]
    bucket: str, listed: dict[str, bytes], proxy: FaultProxy
) -> None:
    config = S3Config.resolve(
        small_object_bytes=0, endpoint_url=proxy.endpoint_url, part_size_bytes=PART, max_retries=1
    )
    proxy.force(Fault.CUT_BODY, 100)

    with pytest.raises(S3NetworkError) as caught:
        for _url, stream in load_prefix(bucket, config):
            stream.read()
    assert caught.value.url in listed

    proxy.forget_forced()
    assert {url: stream.read() for url, stream in load_prefix(bucket, config)} == listed


@pytest.mark.parametrize(
    ("first", "last"),
    [
        (0, 99),
        (1000, 2 * MIB),
        (0, PART - 1),  # a whole part
        (3 * MIB, 3 * MIB + 999),  # past the object's end: the answer is shorter than the range
        (0, PART),  # a byte more than a part: parts in pool buffers, as before
    ],
)
def test_a_byte_range_of_one_part_is_received_into_the_bytes_read_returns(  # type: ignore[no-untyped-def]
    boto_s3, bucket: str, first: int, last: int
) -> None:
    data = payload(21, PART + 3 * MIB + 7 if last >= PART - 1 else 3 * MIB + 7)
    boto_s3.put_object(Bucket=bucket, Key="ranged", Body=data)
    config = S3Config.resolve(small_object_bytes=0, part_size_bytes=PART)
    client = native_client(config)
    landed_before = client.landed_bytes

    stream = S3Client(config).open_native(S3Url(bucket, "ranged"), byte_range=(first, last))

    expected = data[first : last + 1]
    assert stream.read(-1) == expected
    if last - first < PART:  # (longer ranges: read() may land later parts itself, test_landing.py)
        assert client.landed_bytes - landed_before == len(expected)
