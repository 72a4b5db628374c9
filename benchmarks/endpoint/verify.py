"""Checking that an endpoint delivers the latency and bandwidth its profile promises, on one connection.

Both measurements use a single keep-alive HTTP connection, opened (and warmed by a HEAD) before timing:

* time to first byte: median over ``TTFB_SAMPLES`` one-byte ranged GETs, from sending the request to
  having the status line and headers;
* single-connection bandwidth: a whole-object GET of at least ``MIN_BANDWIDTH_OBJECT_BYTES``, bytes over
  the time from the headers to the last byte (so the first-byte latency is not counted as transfer). A GET
  slower than the profile's lower bound is repeated, up to ``PROBE_ATTEMPTS`` in all, and the fastest
  counts: a busy machine only ever slows the reader down, so the fastest GET is the one that tells whether
  the endpoint's pacing is what the profile says.

For an endpoint with writes, ``check_profile(..., writes=True)`` also runs the write probe of
:mod:`benchmarks.endpoint.verify_writes` on another connection.
"""

from __future__ import annotations

import http.client
import ssl
import statistics
import time
from typing import Any, Optional
from urllib.parse import quote, urlsplit

from benchmarks.endpoint.nginx_config import BYTES_PER_MB
from benchmarks.endpoint.verify_writes import (
    min_upload_mbps,
    rates_until_floor,
    verify_writes,
    write_problems,
)

TTFB_SAMPLES = 5
MIN_BANDWIDTH_OBJECT_BYTES = 16 * 1024 * 1024
"""Smaller objects finish within a few of nginx's rate-limiting steps, which makes the rate noisy."""

# Tolerances are wide because shared 2-core machines are noisy; they catch a profile that is not in effect
# (TTFB near zero, unlimited bandwidth) or badly off, not a few percent of drift.
TTFB_LOWER_FACTOR = 0.8  # the sleep is a lower bound; anything well below it means no sleep happened
TTFB_UPPER_FACTOR = 2.0  # scheduling delays on a busy machine add to the sleep...
TTFB_UPPER_SLACK_MS = 20.0  # ...and so does a fixed per-request cost that small targets cannot absorb
BANDWIDTH_LOWER_FACTOR = 0.6  # CPU contention slows the reader; nginx's pacing itself is within a few %
BANDWIDTH_UPPER_FACTOR = 1.15  # above the cap by more than noise means the limit is not applied
FAST_MIN_BANDWIDTH_MBPS = 300.0  # loopback without shaping does GB/s; below this something throttles
# Over TLS the probe (Python's ssl module, one connection) decrypts at ~200 MB/s on the 2-core machine.
FAST_MIN_TLS_BANDWIDTH_MBPS = 100.0

_READ_CHUNK_BYTES = 1024 * 1024


def verify_profile(
    endpoint_url: str,
    bucket: str,
    key: str,
    expected_latency_ms: Optional[float] = None,
    expected_bandwidth_mbps: Optional[float] = None,
    ca_file: Optional[str] = None,
    min_bandwidth_mbps: float = 0.0,
) -> dict[str, Any]:
    """Measure TTFB and single-connection bandwidth against object ``key`` of ``bucket``; over TLS for an
    ``https://`` endpoint, trusting ``ca_file`` (default: the system store).

    The object must have at least ``MIN_BANDWIDTH_OBJECT_BYTES`` (16 MiB). A whole-object GET slower than
    ``min_bandwidth_mbps`` is repeated, up to ``PROBE_ATTEMPTS`` GETs, and the fastest counts. Returns
    ``ttfb_ms`` (median), ``ttfb_samples_ms``, ``bandwidth_mbps`` (MB/s, 10^6 bytes/s, the fastest GET),
    ``bandwidth_samples_mbps``, ``object_bytes``, and the expected values passed in (None when not given),
    for reports.
    """
    path = f"/{quote(bucket, safe='')}/{quote(key, safe='/')}"
    connection = _connect(endpoint_url, ca_file)
    try:
        object_bytes = _object_size(connection, path)
        if object_bytes < MIN_BANDWIDTH_OBJECT_BYTES:
            raise ValueError(
                f"{bucket}/{key} has {object_bytes} bytes; bandwidth needs >= {MIN_BANDWIDTH_OBJECT_BYTES}"
            )
        ttfb_samples_ms = [_ranged_get_ttfb_ms(connection, path) for _ in range(TTFB_SAMPLES)]
        bandwidth_samples_mbps = rates_until_floor(
            lambda: _whole_get_bandwidth_mbps(connection, path, object_bytes), min_bandwidth_mbps
        )
    finally:
        connection.close()
    return {
        "ttfb_ms": statistics.median(ttfb_samples_ms),
        "ttfb_samples_ms": ttfb_samples_ms,
        "bandwidth_mbps": max(bandwidth_samples_mbps),
        "bandwidth_samples_mbps": bandwidth_samples_mbps,
        "object_bytes": object_bytes,
        "expected_latency_ms": expected_latency_ms,
        "expected_bandwidth_mbps": expected_bandwidth_mbps,
    }


def check_profile(
    endpoint_url: str,
    bucket: str,
    key: str,
    profile: str,
    expected_latency_ms: float = 30.0,
    expected_bandwidth_mbps: float = 90.0,
    ca_file: Optional[str] = None,
    writes: bool = False,
) -> dict[str, Any]:
    """:func:`verify_profile`, then raise RuntimeError unless the measurements fit ``profile``.

    ``s3like``: TTFB within [0.8x, 2x + 20 ms] of ``expected_latency_ms`` (default 30) and bandwidth
    within [0.6x, 1.15x] of ``expected_bandwidth_mbps`` (default 90 MB/s). ``fast``: bandwidth of at
    least ``FAST_MIN_BANDWIDTH_MBPS`` (300 MB/s); the expected values are ignored. Returns the
    measurements.

    ``writes`` (default False): also run :func:`benchmarks.endpoint.verify_writes.verify_writes` in
    ``bucket`` (its results under ``"writes"``), with the same tolerances for the PUT latency and the
    single-connection upload rate on ``s3like``, and at least ``FAST_MIN_UPLOAD_MBPS`` (200 MB/s; 100 over
    TLS) on ``fast``; a multipart upload that does not read back exactly raises as well.
    """
    https = endpoint_url.startswith("https:")
    if profile == "fast":
        floor = FAST_MIN_TLS_BANDWIDTH_MBPS if https else FAST_MIN_BANDWIDTH_MBPS
        measured = verify_profile(endpoint_url, bucket, key, ca_file=ca_file, min_bandwidth_mbps=floor)
        problems = []
        if measured["bandwidth_mbps"] < floor:
            problems.append(f"bandwidth {measured['bandwidth_mbps']:.0f} MB/s < {floor}")
    elif profile == "s3like":
        measured = verify_profile(
            endpoint_url,
            bucket,
            key,
            expected_latency_ms,
            expected_bandwidth_mbps,
            ca_file=ca_file,
            min_bandwidth_mbps=BANDWIDTH_LOWER_FACTOR * expected_bandwidth_mbps,
        )
        problems = _s3like_problems(measured, expected_latency_ms, expected_bandwidth_mbps)
    else:
        raise ValueError(f"unknown profile {profile!r}")
    if writes:
        connection = _connect(endpoint_url, ca_file)
        try:
            measured["writes"] = verify_writes(
                connection, bucket, min_upload_mbps(profile, https, expected_bandwidth_mbps)
            )
        finally:
            connection.close()
        measured["writes"]["https"] = https
        problems += write_problems(measured["writes"], profile, expected_latency_ms, expected_bandwidth_mbps)
    if problems:
        raise RuntimeError(
            f"endpoint {endpoint_url} does not deliver profile {profile}: {'; '.join(problems)}"
        )
    return measured


def _connect(endpoint_url: str, ca_file: Optional[str]) -> http.client.HTTPConnection:
    url = urlsplit(endpoint_url)
    if url.scheme not in ("http", "https") or url.hostname is None:
        raise ValueError(f"expected an http(s)://host:port endpoint, got {endpoint_url!r}")
    if url.scheme == "https":
        context = ssl.create_default_context(cafile=ca_file)
        return http.client.HTTPSConnection(url.hostname, url.port or 443, timeout=60, context=context)
    return http.client.HTTPConnection(url.hostname, url.port or 80, timeout=60)


def _s3like_problems(measured: dict[str, Any], latency_ms: float, bandwidth_mbps: float) -> list[str]:
    problems = []
    ttfb_low = TTFB_LOWER_FACTOR * latency_ms
    ttfb_high = TTFB_UPPER_FACTOR * latency_ms + TTFB_UPPER_SLACK_MS
    if not ttfb_low <= measured["ttfb_ms"] <= ttfb_high:
        problems.append(f"TTFB {measured['ttfb_ms']:.1f} ms outside [{ttfb_low:.1f}, {ttfb_high:.1f}] ms")
    bandwidth_low = BANDWIDTH_LOWER_FACTOR * bandwidth_mbps
    bandwidth_high = BANDWIDTH_UPPER_FACTOR * bandwidth_mbps
    if not bandwidth_low <= measured["bandwidth_mbps"] <= bandwidth_high:
        problems.append(
            f"bandwidth {measured['bandwidth_mbps']:.1f} MB/s outside "
            f"[{bandwidth_low:.1f}, {bandwidth_high:.1f}] MB/s (the fastest of "
            f"{len(measured['bandwidth_samples_mbps'])} GETs)"
        )
    return problems


def _object_size(connection: http.client.HTTPConnection, path: str) -> int:
    connection.request("HEAD", path)
    response = _expect(connection.getresponse(), 200, path)
    response.read()
    return int(response.headers["Content-Length"])


def _ranged_get_ttfb_ms(connection: http.client.HTTPConnection, path: str) -> float:
    started = time.perf_counter()
    connection.request("GET", path, headers={"Range": "bytes=0-0"})
    response = connection.getresponse()  # returns once the status line and headers have arrived
    first_byte_ms = (time.perf_counter() - started) * 1000
    _expect(response, 206, path).read()
    return first_byte_ms


def _whole_get_bandwidth_mbps(connection: http.client.HTTPConnection, path: str, object_bytes: int) -> float:
    connection.request("GET", path)
    response = _expect(connection.getresponse(), 200, path)
    started = time.perf_counter()
    buffer = memoryview(bytearray(_READ_CHUNK_BYTES))
    received = 0
    while True:
        count = response.readinto(buffer)
        if not count:
            break
        received += count
    elapsed_s = time.perf_counter() - started
    if received != object_bytes:
        raise RuntimeError(f"GET {path} returned {received} bytes, expected {object_bytes}")
    return received / elapsed_s / BYTES_PER_MB


def _expect(response: http.client.HTTPResponse, status: int, path: str) -> http.client.HTTPResponse:
    if response.status != status:
        body = response.read()[:500]
        raise RuntimeError(f"{path}: expected HTTP {status}, got {response.status}: {body!r}")
    return response
