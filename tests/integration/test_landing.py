"""A whole read() receives the parts not begun yet straight into its result (no pool buffer, no copy).

ObjectStream.land_in and the CRT patch "a GET part can land where its reader wants it"
(cmake/AwsCrtPatches.cmake).
The read window is one part here, so every part after the first two can only begin once read() is waiting:
those must land. What must hold around it: byte-exact results through retries, a typed error when a landing
read fails, and no CRT thread writing into a result that was freed (the sanitizer run includes this file).
"""

from __future__ import annotations

import gc
import random
import time
from collections.abc import Iterator

import pytest
from torch.utils.data.datapipes.iter import IterableWrapper

from tests.fault_proxy import Fault, FaultProxy, ProxiedRequest
from tests.s3_server import MotoServer
from torchdata_s3 import S3Config, S3FileLoader, S3NetworkError, S3TimeoutError
from torchdata_s3.client import native_client

pytestmark = pytest.mark.integration

PART = 64 * 1024  # the smallest part size S3Config accepts
PARTS = 12
OBJECT_SIZE = PARTS * PART - 777  # the last part short


@pytest.fixture
def proxy(moto_server: MotoServer, s3_endpoint: str) -> Iterator[FaultProxy]:
    with FaultProxy(moto_server.port, seed=3, stall_s=30) as running:
        yield running


def payload(seed: int) -> bytes:
    return random.Random(seed).randbytes(OBJECT_SIZE)  # no repeats: a misplaced part cannot go unnoticed


def later_part(request: ProxiedRequest) -> bool:
    """A GET of a part after the first (the CRT sends those with If-Match)."""
    return request.is_get_object and "if-match" in request.headers


def open_stream(url: str, config: S3Config):  # type: ignore[no-untyped-def]
    [(_url, stream)] = list(S3FileLoader(IterableWrapper([url]), config=config))
    return stream


def one_part_window(**overrides: object) -> S3Config:
    return S3Config.resolve(part_size_bytes=PART, read_window_bytes=PART, **overrides)


def test_a_whole_read_receives_later_parts_in_its_result(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    data = payload(seed=1)
    boto_s3.put_object(Bucket=bucket, Key="obj", Body=data)
    config = one_part_window()
    client = native_client(config)
    landed_before = client.landed_bytes

    assert open_stream(f"s3://{bucket}/obj", config).read() == data

    landed = client.landed_bytes - landed_before
    # Parts 3.. cannot begin before read() waits for them; the first two may already be in pool buffers.
    assert OBJECT_SIZE - 2 * PART <= landed <= OBJECT_SIZE
    assert client.pinned_pool_bytes == 0


def test_a_read_of_less_than_the_rest_copies_as_before(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    data = payload(seed=2)
    boto_s3.put_object(Bucket=bucket, Key="obj", Body=data)
    config = one_part_window()
    client = native_client(config)
    landed_before = client.landed_bytes
    stream = open_stream(f"s3://{bucket}/obj", config)

    head = stream.read(OBJECT_SIZE - PART)
    assert client.landed_bytes == landed_before  # the result does not reach the end: nothing lands
    assert head + stream.read() == data


def test_a_part_cut_off_while_landing_is_received_again_in_place(
    boto_s3, bucket: str, proxy: FaultProxy
) -> None:  # type: ignore[no-untyped-def]
    data = payload(seed=3)
    boto_s3.put_object(Bucket=bucket, Key="obj", Body=data)
    config = one_part_window(endpoint_url=proxy.endpoint_url)
    client = native_client(config)
    landed_before = client.landed_bytes
    stream = open_stream(f"s3://{bucket}/obj", config)
    stream.read(1)  # the first part is here: every part cut from now on was landing
    proxy.force(Fault.CUT_BODY, 2, eligible=later_part)

    assert stream.read() == data[1:]

    assert proxy.injected == {Fault.CUT_BODY: 2}
    assert client.landed_bytes - landed_before >= OBJECT_SIZE - 3 * PART


def test_a_landing_read_that_fails_raises_typed_and_the_client_reads_on(
    boto_s3, bucket: str, proxy: FaultProxy
) -> None:  # type: ignore[no-untyped-def]
    data = payload(seed=4)
    boto_s3.put_object(Bucket=bucket, Key="obj", Body=data)
    url = f"s3://{bucket}/obj"
    config = one_part_window(endpoint_url=proxy.endpoint_url, max_retries=1)
    stream = open_stream(url, config)
    stream.read(1)
    proxy.force(Fault.CUT_BODY, 100, eligible=later_part)

    with pytest.raises(S3NetworkError) as caught:
        stream.read()
    assert caught.value.url == url

    proxy.forget_forced()
    assert open_stream(url, config).read() == data


def test_a_landing_read_that_times_out_returns_promptly(boto_s3, bucket: str, proxy: FaultProxy) -> None:  # type: ignore[no-untyped-def]
    data = payload(seed=5)
    boto_s3.put_object(Bucket=bucket, Key="obj", Body=data)
    url = f"s3://{bucket}/obj"
    # A stalled part keeps its connection writing into the result until the transfer is cancelled: read()
    # must cancel it and wait for it to wind down before it lets go of the result.
    config = one_part_window(endpoint_url=proxy.endpoint_url, max_retries=0, request_timeout_ms=1500)
    stream = open_stream(url, config)
    stream.read(1)
    proxy.force(Fault.STALL_BODY, 100, eligible=later_part)
    started = time.monotonic()

    with pytest.raises((S3TimeoutError, S3NetworkError)) as caught:
        stream.read()

    assert caught.value.url == url
    assert time.monotonic() - started < 15

    proxy.forget_forced()
    assert open_stream(url, config).read() == data


# The object is held whole by default (retain_bytes 64 MiB): the kept bytes are the result's own, kept alive
# by the stream. With retain_bytes of one part the stream keeps a copy of the last part instead.
@pytest.mark.parametrize("retain_bytes", [None, PART], ids=["held_whole", "last_part"])
def test_the_bytes_kept_for_a_seek_back_outlive_the_result(
    boto_s3, bucket: str, proxy: FaultProxy, retain_bytes: int | None
) -> None:  # type: ignore[no-untyped-def]
    data = payload(seed=6)
    boto_s3.put_object(Bucket=bucket, Key="obj", Body=data)
    url = f"s3://{bucket}/obj"
    overrides = {} if retain_bytes is None else {"retain_bytes": retain_bytes}
    config = one_part_window(endpoint_url=proxy.endpoint_url, **overrides)
    client = native_client(config)
    landed_before = client.landed_bytes
    stream = open_stream(url, config)

    result = stream.read()
    assert result == data and client.landed_bytes > landed_before
    gets = proxy.attempts("/" + url[len("s3://") :])
    del result
    gc.collect()

    stream.seek(OBJECT_SIZE - PART // 2)
    assert stream.read() == data[-(PART // 2) :]
    assert proxy.attempts("/" + url[len("s3://") :]) == gets  # served from the bytes kept, no new GET
