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

import pytest

from tests.fault_proxy import FaultProxy
from tests.s3_server import MotoServer
from torchdata_s3 import S3Client, S3Config
from torchdata_s3.prefetch import FLOOR_PARTS, PrefetchWindow, read_ahead_budget
from torchdata_s3.url import parse_s3_url

pytestmark = pytest.mark.integration

PART = 64 * 1024
MiB = 1024 * 1024
PROXY_LATENCY_S = 0.2
RATE = 3.125e9  # bytes/s: the default throughput target, 25 Gbit/s
# A modest target rate for the window test: loopback moto (a few ms per request) stays at the floor, and the
# proxy's delay asks for more than the ceiling.
TEST_RATE = 5e6


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
    stream = S3Client(config).open(url)
    latency = stream.wait_for_first_byte_latency()
    assert latency is not None and PROXY_LATENCY_S <= latency < PROXY_LATENCY_S + 5
    assert stream.read() == bytes([0]) * 3 * PART  # measuring took nothing from the reader
    assert stream.first_byte_latency <= latency  # the quickest of its three requests


def test_waiting_on_a_failed_get_keeps_its_error_for_the_reader(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    from torchdata_s3.errors import S3FileNotFoundError

    stream = S3Client(S3Config.resolve(part_size_bytes=PART)).open(f"s3://{bucket}/missing")
    # The 404 was a round trip too: whether its telemetry or its failure arrives first, the wait neither
    # raises nor hangs.
    latency = stream.wait_for_first_byte_latency()
    assert latency is None or latency >= 0
    with pytest.raises(S3FileNotFoundError):
        stream.read()


def fill(window: PrefetchWindow, client: S3Client, urls: list[str], size: int) -> None:
    """What the loader does: open objects ahead until the budget refuses one."""
    for url in urls:
        cost = window.cost_of(size)
        if not window.has_room_for(cost):
            return
        stream = client.open_location(parse_s3_url(url), window_bytes=window.window_of(size))
        window.add(url, stream, size, cost)


@pytest.mark.parametrize("far", [False, True], ids=["near", "far"])
def test_the_budget_follows_the_measured_round_trip(
    boto_s3, bucket: str, far_endpoint: FaultProxy, far: bool
) -> None:  # type: ignore[no-untyped-def]
    size = 4 * PART
    urls = put_objects(boto_s3, bucket, 40, size)
    endpoint = far_endpoint.endpoint_url if far else None
    client = S3Client(S3Config.resolve(endpoint_url=endpoint, part_size_bytes=PART))
    ceiling = 64 * PART  # 16 objects of 4 parts
    window = PrefetchWindow(64, ceiling, PART, reading_window=size, rate=TEST_RATE)
    assert window.budget == FLOOR_PARTS * PART  # nothing measured yet
    try:
        fill(window, client, urls, size)
        assert window.latency is not None  # the first refusal waited for the oldest object's round trip
        if far:
            assert window.latency >= PROXY_LATENCY_S
            assert window.budget == ceiling
        else:
            assert window.latency < 0.035  # 6 round trips at TEST_RATE stay under the floor
            assert window.budget == FLOOR_PARTS * PART
        # Whatever was opened is delivered intact, in order.
        expected = 0
        while window:
            url, stream = window.pop()
            assert url == urls[expected]
            assert stream.read() == bytes([expected]) * size
            expected += 1
        assert expected == window.budget // size
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
    ("setting", "expected"), [("", max(2, len(os.sched_getaffinity(0)) // 2)), ("1", 1), ("3", 3)]
)
def test_event_loop_threads_come_from_the_environment(setting: str, expected: int) -> None:
    result = event_loop_threads_with({"TORCHDATA_S3_EVENT_LOOP_THREADS": setting})
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) == expected


def test_a_bad_event_loop_thread_count_is_refused_by_name() -> None:
    bad = event_loop_threads_with({"TORCHDATA_S3_EVENT_LOOP_THREADS": "many"})
    assert bad.returncode != 0
    assert "TORCHDATA_S3_EVENT_LOOP_THREADS='many' is not a thread count" in bad.stderr
