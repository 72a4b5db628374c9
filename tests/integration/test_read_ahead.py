"""How far ahead the loader reads: sized by the endpoint's round trip, measured by the CRT on real requests.

A near endpoint (moto on loopback) gets the floor; the same server behind a proxy that answers every request
only after a delay gets the full ``max_inflight_bytes``. Both through real HTTP; nothing is mocked.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Optional

import pytest

from tests.fault_proxy import FaultProxy
from tests.s3_server import MotoServer
from torchdata_s3 import S3Client, S3Config
from torchdata_s3.config import MIN_EVENT_LOOP_THREADS
from torchdata_s3.prefetch import FLOOR_PARTS, PrefetchWindow, read_ahead_budget
from torchdata_s3.url import parse_s3_url

pytestmark = pytest.mark.integration

PART = 64 * 1024
MiB = 1024 * 1024
PROXY_LATENCY_S = 0.2
RATE = 3.125e9  # bytes/s: the default throughput target, 25 Gbit/s
# A modest target rate for the window test: loopback moto (a few ms per request; under 36 ms) stays at the
# floor of two parts, and the proxy's delay asks for more than the ceiling.
TEST_RATE = 6e5


@pytest.fixture
def far_endpoint(moto_server: MotoServer, s3_endpoint: str) -> Iterator[FaultProxy]:
    with FaultProxy(moto_server.port, latency_s=PROXY_LATENCY_S) as proxy:
        yield proxy


def put_objects(boto_s3, bucket: str, count: int, size: int) -> list[str]:  # type: ignore[no-untyped-def]
    urls = []
    for index in range(count):
        key = f"object-{index}"
        boto_s3.put_object(Bucket=bucket, Key=key, Body=bytes([index]) * size)
        urls.append(f"s3://{bucket}/{key}")
    return urls


def test_a_get_reports_the_round_trip_of_its_requests(boto_s3, bucket: str, far_endpoint: FaultProxy) -> None:  # type: ignore[no-untyped-def]
    [url] = put_objects(boto_s3, bucket, 1, 3 * PART)
    config = S3Config.resolve(endpoint_url=far_endpoint.endpoint_url, part_size_bytes=PART)
    stream = S3Client(config).open_native(parse_s3_url(url))
    latency = stream.wait_for_first_byte_latency()
    assert latency is not None and PROXY_LATENCY_S <= latency < PROXY_LATENCY_S + 5
    assert stream.read() == bytes([0]) * 3 * PART  # measuring took nothing from the reader
    assert stream.first_byte_latency <= latency  # the quickest of its three requests


def test_waiting_on_a_failed_get_keeps_its_error_for_the_reader(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    from torchdata_s3.errors import S3FileNotFoundError

    stream = S3Client(S3Config.resolve(part_size_bytes=PART)).open_native(
        parse_s3_url(f"s3://{bucket}/missing")
    )
    # The 404 was a round trip too: whether its telemetry or its failure arrives first, the wait neither
    # raises nor hangs.
    latency = stream.wait_for_first_byte_latency()
    assert latency is None or latency >= 0
    with pytest.raises(S3FileNotFoundError):
        stream.read()


def test_a_measurement_that_runs_out_of_patience_leaves_the_stream_readable(
    moto_server: MotoServer, boto_s3, bucket: str
) -> None:  # type: ignore[no-untyped-def]
    # The answer comes after 0.9 s, past the measuring wait's 0.6 s: the wait gives up and reports nothing,
    # and the reader, whose own wait starts then, gets every byte. (The measuring wait used to fail the
    # stream with S3TimeoutError.) 0.9 s stays below the CRT's stalled-connection check (1 s here).
    [url] = put_objects(boto_s3, bucket, 1, PART)  # one request: a second would wait 0.9 s more
    with FaultProxy(moto_server.port, latency_s=0.9) as slow:
        config = S3Config.resolve(
            endpoint_url=slow.endpoint_url, part_size_bytes=PART, request_timeout_ms=600
        )
        stream = S3Client(config).open_native(parse_s3_url(url))
        assert stream.wait_for_first_byte_latency() is None
        assert stream.read() == bytes([0]) * PART


def fill(window: PrefetchWindow, client: S3Client, urls: list[str], size: Optional[int]) -> int:
    """What the loader does: open objects ahead until the window refuses one. Returns how many it opened."""
    for opened, url in enumerate(urls):
        if not window.has_room_for(size):
            return opened
        stream = client.open_native(parse_s3_url(url), window_bytes=window.window_of(size))
        window.add(url, stream, size)
    return len(urls)


def pop_checked(window: PrefetchWindow, urls: list[str], index: int, size: int) -> None:
    """Pops the next object, checking that it is urls[index] and delivered intact."""
    url, stream = window.pop()
    assert (url, stream.read()) == (urls[index], bytes([index]) * size)


def drain(window: PrefetchWindow, urls: list[str], size: int, start: int = 0) -> int:
    """Pops every object ahead (urls[start] first), checking each one. Returns how many there were."""
    delivered = 0
    while window:
        pop_checked(window, urls, start + delivered, size)
        delivered += 1
    return delivered


SMALL = 1000  # bytes: a small object, far below a part


def small_objects(boto_s3, bucket: str, count: int) -> tuple[list[str], S3Client]:  # type: ignore[no-untyped-def]
    """`count` objects of SMALL bytes, and a client with PART-sized parts to read them."""
    return put_objects(boto_s3, bucket, count, SMALL), S3Client(S3Config.resolve(part_size_bytes=PART))


@pytest.mark.parametrize("far", [False, True], ids=["near", "far"])
def test_the_budget_follows_the_measured_round_trip(
    boto_s3, bucket: str, far_endpoint: FaultProxy, far: bool
) -> None:  # type: ignore[no-untyped-def]
    size = 4 * PART
    urls = put_objects(boto_s3, bucket, 40, size)
    endpoint = far_endpoint.endpoint_url if far else None
    client = S3Client(S3Config.resolve(endpoint_url=endpoint, part_size_bytes=PART))
    ceiling = 8 * PART  # two objects of 4 parts
    window = PrefetchWindow(64, ceiling, PART, reading_window=size, rate=TEST_RATE)
    assert window.budget == FLOOR_PARTS * PART  # nothing measured yet
    try:
        fill(window, client, urls, size)
        assert window.latency is not None  # the first refusal waited for the oldest object's round trip
        if far:
            assert window.latency >= PROXY_LATENCY_S
            assert window.budget == ceiling
        else:
            assert window.latency < 0.036  # 6 round trips at TEST_RATE stay under the floor
            assert window.budget == FLOOR_PARTS * PART
        # Whatever was opened is delivered intact, in order: as many as the budget holds, and always one.
        assert drain(window, urls, size) == max(1, window.budget // size)
    finally:
        window.close()


def test_small_objects_of_unknown_size_fill_the_count_not_the_budget(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    # Until its headers arrive an object of unknown size might hold a whole part, so a budget of two parts
    # would admit two. Once a few sizes are known, later objects are expected to be as small: the count
    # limit (8 ahead, plus the one allowed beyond it) is what stops the window, and the worst case (every
    # object a whole part) still stays within max_bytes.
    urls, client = small_objects(boto_s3, bucket, 20)
    window = PrefetchWindow(8, 64 * PART, PART, reading_window=4 * PART, rate=TEST_RATE)
    try:
        # Sizes are learnt as headers arrive, never waited for (but the first answer's, once): on a loaded
        # machine the window may refuse while only one size is known. Then the headers are waited for and
        # the loader's next try goes on; either way the count is what stops it.
        opened = fill(window, client, urls, None)
        for ahead in list(window._ahead):
            ahead.stream.wait_for_first_byte_latency()
        opened += fill(window, client, urls[opened:], None)
        assert opened == 9
        assert window.budget == FLOOR_PARTS * PART
        assert drain(window, urls, SMALL) == 9
    finally:
        window.close()


def test_objects_of_unknown_size_never_exceed_the_worst_case_limit(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    # However small the objects seen so far, one of unknown size might hold a whole part until its headers
    # arrive: with max_bytes of three parts, at no point may more than three such parts be outstanding. The
    # loader's own loop, checked after every step.
    urls, client = small_objects(boto_s3, bucket, 30)
    window = PrefetchWindow(64, 3 * PART, PART, reading_window=4 * PART, rate=TEST_RATE)
    delivered = 0
    try:
        for url in urls:
            while not window.has_room_for(None):
                pop_checked(window, urls, delivered, SMALL)
                delivered += 1
            window.add(url, client.open_native(parse_s3_url(url), window_bytes=PART), None)
            assert window.worst_case_bytes <= 3 * PART
            assert window.expected_bytes <= window.budget
        delivered += drain(window, urls, SMALL, start=delivered)
        assert delivered == len(urls)
    finally:
        window.close()


def test_the_nearest_objects_grow_whole_before_further_ones_are_requested(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    # Large objects of unknown size (the loader over a list of URLs): each starts with one part and grows to
    # its window once its headers tell its size. The loader's own loop, every answer waited for so that sizes
    # are known whenever the window decides. While an object ahead is short of its window, the window must
    # refuse new objects: requesting one whenever a part was free kept every object at one part (breadth:
    # 550 MB/s on `s3like` against 3 GB/s). A fast rate puts the measured budget at the ceiling.
    size = 4 * PART
    urls = put_objects(boto_s3, bucket, 12, size)
    client = S3Client(S3Config.resolve(part_size_bytes=PART))
    window = PrefetchWindow(64, 8 * PART, PART, reading_window=size, rate=1e12)
    delivered = 0
    try:
        for url in urls:
            while True:
                for ahead in list(window._ahead):
                    ahead.stream.wait_for_first_byte_latency()
                if window.has_room_for(None):
                    break
                pop_checked(window, urls, delivered, size)
                delivered += 1
            short = [a.url for a in window._ahead if a.size is not None and a.cost < window.cost_of(a.size)]
            assert not short, f"{url} requested while {short} wait to grow"
            window.add(url, client.open_native(parse_s3_url(url), window_bytes=PART), None)
            assert window.worst_case_bytes <= 8 * PART
        assert window.budget == 8 * PART
        # Once sizes are known, an object of unknown size is expected to cost as much as the recent ones.
        assert window.expected_cost_of(None) == size
        delivered += drain(window, urls, size, start=delivered)
        assert delivered == len(urls)
    finally:
        window.close()


def test_budget_arithmetic() -> None:
    part = 8 * MiB
    ceiling = 512 * MiB
    floor = FLOOR_PARTS * part
    assert read_ahead_budget(None, RATE, part, ceiling) == floor  # unknown: the floor
    assert read_ahead_budget(0.0003, RATE, part, ceiling) == floor  # loopback
    assert floor < read_ahead_budget(0.010, RATE, part, ceiling) < ceiling  # a LAN or a near region
    assert read_ahead_budget(0.030, RATE, part, ceiling) == ceiling  # S3's typical first byte
    assert read_ahead_budget(0.030, RATE, part, 32 * MiB) == 32 * MiB  # the floor never exceeds the ceiling


def event_loop_threads_with(environment: dict[str, str]) -> subprocess.CompletedProcess:
    # A fresh interpreter: the event loop group is per process, sized by its first client.
    code = """
        import torchdata_s3
        from torchdata_s3.client import native_client
        client = native_client(torchdata_s3.S3Config(endpoint_url="http://127.0.0.1:9", anonymous=True))
        print(client.event_loop_threads)
    """
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**os.environ, **environment},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("setting", "expected"),
    [("", max(MIN_EVENT_LOOP_THREADS, len(os.sched_getaffinity(0)) // 2)), ("1", 1), ("3", 3)],
)
def test_event_loop_threads_come_from_the_environment(setting: str, expected: int) -> None:
    result = event_loop_threads_with({"TORCHDATA_S3_EVENT_LOOP_THREADS": setting})
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) == expected


def test_a_bad_event_loop_thread_count_is_refused_by_name() -> None:
    bad = event_loop_threads_with({"TORCHDATA_S3_EVENT_LOOP_THREADS": "many"})
    assert bad.returncode != 0
    assert "TORCHDATA_S3_EVENT_LOOP_THREADS='many' is not a thread count" in bad.stderr
