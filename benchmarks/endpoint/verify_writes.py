"""Checking what an endpoint with writes delivers to one uploading connection, as verify.py does for reads.

On one keep-alive HTTP connection, opened (and warmed by a HEAD) before timing, writing under
``<bucket>/endpoint-write-probe/<random>/`` and deleting what it wrote:

* PUT latency: median over ``PUT_LATENCY_SAMPLES`` PutObjects of one byte, from sending the request to having
  the response's status line and headers (on ``s3like``: the latency the endpoint adds after a body);
* single-connection upload rate: one PutObject of ``UPLOAD_PROBE_BYTES``, its bytes over the time from
  sending to the response, less the median PUT latency (so, as for reads, latency is not counted as
  transfer); one slower than the profile's lower bound is sent again, up to ``PROBE_ATTEMPTS`` in all, and
  the fastest counts (a busy machine only slows the sender down);
* an 8-part multipart upload (parts of S3's 5 MiB minimum, each with different bytes), read back with a GET
  and compared byte for byte, then checked to have left no pending upload.
"""

from __future__ import annotations

import http.client
import os
import re
import statistics
import time
from typing import Any, Callable
from urllib.parse import quote

from benchmarks.endpoint.nginx_config import BYTES_PER_MB

PUT_LATENCY_SAMPLES = 5
UPLOAD_PROBE_BYTES = 32 * 1024 * 1024
MULTIPART_PARTS = 8
MULTIPART_PART_BYTES = 5 * 1024 * 1024
# Wide, like the read check's: a shared 2-core machine is noisy; these catch a profile not in effect.
FAST_MIN_UPLOAD_MBPS = (
    200.0  # an unshaped loopback PUT to page cache does GB/s; below this something throttles
)
FAST_MIN_TLS_UPLOAD_MBPS = 100.0  # the probe's own encryption (Python's ssl, one connection) is the limit
PROBE_ATTEMPTS = 3
"""Rate probes (this module's upload, verify.py's GET) under their floor run again, up to this many times in
all: CI's busiest step once measured 53.9 MB/s over TLS against a 54 MB/s floor (s3like's 90 x 0.6)."""

_UPLOAD_ID = re.compile(rb"<UploadId>([^<]+)</UploadId>")


def verify_writes(
    connection: http.client.HTTPConnection, bucket: str, min_upload_mbps: float = 0.0
) -> dict[str, Any]:
    """Measure PUT latency and single-connection upload rate, and round-trip an 8-part multipart upload,
    over ``connection`` (not yet used). An upload slower than ``min_upload_mbps`` is sent again, up to
    ``PROBE_ATTEMPTS`` in all. Returns ``put_latency_ms`` (median), ``put_latency_samples_ms``,
    ``upload_mbps`` (MB/s, 10^6 bytes/s, the fastest upload), ``upload_samples_mbps``, ``upload_bytes``,
    ``multipart_bytes`` and ``multipart_seconds`` (from Create to the end of Complete). Raises RuntimeError
    if a request fails or the upload does not read back exactly.
    """
    prefix = f"/{quote(bucket, safe='')}/endpoint-write-probe/{os.urandom(6).hex()}"
    _call(connection, "HEAD", f"/{quote(bucket, safe='')}", expected=200)
    written = [f"{prefix}/small", f"{prefix}/large", f"{prefix}/multipart"]
    try:
        latencies_ms = []
        for _ in range(PUT_LATENCY_SAMPLES):
            started = time.perf_counter()
            _call(connection, "PUT", written[0], b"x", expected=200)
            latencies_ms.append((time.perf_counter() - started) * 1000)
        latency_ms = statistics.median(latencies_ms)
        large = memoryview(os.urandom(UPLOAD_PROBE_BYTES))

        def upload_mbps() -> float:
            started = time.perf_counter()
            _call(connection, "PUT", written[1], large, expected=200)
            transfer_s = time.perf_counter() - started - latency_ms / 1000
            return UPLOAD_PROBE_BYTES / transfer_s / BYTES_PER_MB

        upload_samples_mbps = rates_until_floor(upload_mbps, min_upload_mbps)
        parts = [os.urandom(MULTIPART_PART_BYTES) for _ in range(MULTIPART_PARTS)]
        multipart_s = _multipart_round_trip(connection, bucket, written[2], parts)
    finally:
        for path in written:
            _call(connection, "DELETE", path, expected=204)
    return {
        "put_latency_ms": latency_ms,
        "put_latency_samples_ms": latencies_ms,
        "upload_mbps": max(upload_samples_mbps),
        "upload_samples_mbps": upload_samples_mbps,
        "upload_bytes": UPLOAD_PROBE_BYTES,
        "multipart_bytes": MULTIPART_PARTS * MULTIPART_PART_BYTES,
        "multipart_seconds": multipart_s,
    }


def rates_until_floor(measure: Callable[[], float], floor_mbps: float) -> list[float]:
    """``measure()`` run until one rate reaches ``floor_mbps``, at most ``PROBE_ATTEMPTS`` times; every rate
    measured, in order (the fastest is the one that counts: a busy machine only slows a probe down)."""
    rates: list[float] = []
    while len(rates) < PROBE_ATTEMPTS:
        rates.append(measure())
        if rates[-1] >= floor_mbps:
            break
    return rates


def min_upload_mbps(profile: str, https: bool, bandwidth_mbps: float) -> float:
    """The slowest single-connection upload rate ``profile`` accepts (``bandwidth_mbps``: s3like's cap)."""
    if profile == "fast":
        return FAST_MIN_TLS_UPLOAD_MBPS if https else FAST_MIN_UPLOAD_MBPS
    from benchmarks.endpoint import verify

    return verify.BANDWIDTH_LOWER_FACTOR * bandwidth_mbps


def write_problems(
    measured: dict[str, Any], profile: str, latency_ms: float, bandwidth_mbps: float
) -> list[str]:
    """What in :func:`verify_writes`' ``measured`` does not fit ``profile``, with the read check's
    tolerances (imported from :mod:`benchmarks.endpoint.verify`); empty when everything does."""
    from benchmarks.endpoint import verify

    rate = measured["upload_mbps"]
    attempts = f"the fastest of {len(measured['upload_samples_mbps'])} uploads"
    low = min_upload_mbps(profile, bool(measured.get("https")), bandwidth_mbps)
    if profile == "fast":
        return [f"upload {rate:.0f} MB/s < {low} ({attempts})"] if rate < low else []
    problems = []
    fastest, slowest = (
        verify.TTFB_LOWER_FACTOR * latency_ms,
        verify.TTFB_UPPER_FACTOR * latency_ms + verify.TTFB_UPPER_SLACK_MS,
    )
    latency = measured["put_latency_ms"]
    if not fastest <= latency <= slowest:
        problems.append(f"PUT latency {latency:.1f} ms outside [{fastest:.1f}, {slowest:.1f}] ms")
    high = verify.BANDWIDTH_UPPER_FACTOR * bandwidth_mbps
    if not low <= rate <= high:
        problems.append(f"upload {rate:.1f} MB/s outside [{low:.1f}, {high:.1f}] MB/s ({attempts})")
    return problems


def _multipart_round_trip(
    connection: http.client.HTTPConnection, bucket: str, path: str, parts: list[bytes]
) -> float:
    """Upload ``parts`` as a multipart upload of ``path``, check it; return the seconds from Create to the
    end of Complete."""
    started = time.perf_counter()
    created = _call(connection, "POST", f"{path}?uploads", expected=200)
    found = _UPLOAD_ID.search(created)
    if found is None:
        raise RuntimeError(f"CreateMultipartUpload answered no UploadId: {created[:300]!r}")
    upload = quote(found.group(1).decode())
    etags = []
    for number, part in enumerate(parts, start=1):
        connection.request("PUT", f"{path}?partNumber={number}&uploadId={upload}", body=part)
        response = connection.getresponse()
        response.read()
        if response.status != 200 or not response.headers.get("ETag"):
            raise RuntimeError(
                f"UploadPart {number}: HTTP {response.status}, ETag {response.headers.get('ETag')}"
            )
        etags.append(response.headers["ETag"])
    listing = "".join(
        f"<Part><PartNumber>{number}</PartNumber><ETag>{etag}</ETag></Part>"
        for number, etag in enumerate(etags, start=1)
    )
    _call(
        connection,
        "POST",
        f"{path}?uploadId={upload}",
        f"<CompleteMultipartUpload>{listing}</CompleteMultipartUpload>".encode(),
        expected=200,
    )
    upload_s = time.perf_counter() - started
    if _call(connection, "GET", path, expected=200) != b"".join(parts):
        raise RuntimeError(f"{path}: the completed multipart upload does not read back byte-exact")
    pending = _call(connection, "GET", f"/{quote(bucket, safe='')}?uploads", expected=200)
    if found.group(1) in pending:
        raise RuntimeError(f"upload {found.group(1)!r} is still listed as pending after completing")
    return upload_s


def _call(
    connection: http.client.HTTPConnection, method: str, path: str, body: Any = None, expected: int = 200
) -> bytes:
    connection.request(method, path, body=body)
    response = connection.getresponse()
    content = response.read()
    if response.status != expected:
        raise RuntimeError(
            f"{method} {path}: expected HTTP {expected}, got {response.status}: {content[:300]!r}"
        )
    return content
