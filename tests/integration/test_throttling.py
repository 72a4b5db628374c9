"""Throttling: an endpoint that admits a fixed request rate and answers 503 SlowDown above it, as S3 does per
prefix (tests/throttle.py, a gate of the fault proxy). Listing, loading, uploads and checkpoint saves finish
byte-exact under it, and loading uses most of the admitted rate without a storm of retries: the client paces
itself (``adaptive_rate``, csrc/send_pacer.h) instead of letting each request back off on its own, which
failed a loader within its first objects (max_retries of SlowDown in a row).
"""

from __future__ import annotations

import hashlib
import io
import random
from collections.abc import Iterator

import pytest
import torch
from torch.utils.data.datapipes.iter import IterableWrapper

import torchdata_s3
from tests.fault_proxy import Fault, FaultProxy
from tests.s3_server import MotoServer
from tests.throttle import Throttle
from torchdata_s3 import S3Client, S3Config, S3Error, S3FileLister, S3FileLoader
from torchdata_s3.client import native_client

pytestmark = pytest.mark.integration

OBJECTS = 300
SIZE = 4096


def body(index: int) -> bytes:
    return random.Random(index).randbytes(SIZE)


@pytest.fixture
def proxy(moto_server: MotoServer, s3_endpoint: str) -> Iterator[FaultProxy]:
    with FaultProxy(moto_server.port) as running:
        yield running


def throttled(proxy: FaultProxy, rate: float) -> tuple[Throttle, S3Config]:
    throttle = Throttle(rate)
    proxy.set_gate(throttle)
    return throttle, S3Config.resolve(
        endpoint_url=proxy.endpoint_url,
        multipart_threshold_bytes=5 * 1024 * 1024,
        part_size_bytes=5 * 1024 * 1024,
    )


def test_loading_under_throttling_is_exact_and_uses_most_of_the_admitted_rate(
    boto_s3, bucket: str, proxy: FaultProxy
) -> None:  # type: ignore[no-untyped-def]
    for index in range(OBJECTS):
        boto_s3.put_object(Bucket=bucket, Key=f"obj{index:04d}", Body=body(index))
    throttle, config = throttled(proxy, rate=30)
    urls = [f"s3://{bucket}/obj{index:04d}" for index in range(OBJECTS)]

    loaded = {url: stream.read() for url, stream in S3FileLoader(IterableWrapper(urls), config=config)}

    assert loaded == {url: body(index) for index, url in enumerate(urls)}
    assert throttle.refused, "the client never met the limit: the test says nothing"
    assert native_client(config).pacing_rate > 0
    used = throttle.admitted_rate() / throttle.rate
    assert used >= 0.8, f"{used:.0%} of the admitted rate"
    # No retry storm: past the first second (the burst that meets the limit before any answer says so),
    # most attempts are admitted.
    settled = throttle.refused[0] + 1.0
    late_refused = sum(1 for at in throttle.refused if at > settled)
    late_admitted = sum(1 for at in throttle.admitted if at > settled)
    assert late_refused <= 0.25 * late_admitted, (late_refused, late_admitted)


def test_listing_under_throttling_lists_every_key_once(boto_s3, bucket: str, proxy: FaultProxy) -> None:  # type: ignore[no-untyped-def]
    keys = [f"k/{index:05d}" for index in range(600)]
    for key in keys:
        boto_s3.put_object(Bucket=bucket, Key=key, Body=b"")
    throttle, config = throttled(proxy, rate=4)

    listed = list(S3FileLister(IterableWrapper([f"s3://{bucket}/k/"]), page_size=40, config=config))

    assert listed == [f"s3://{bucket}/{key}" for key in keys]
    assert throttle.refused


def test_uploads_and_checkpoints_under_throttling_land_exact(boto_s3, bucket: str, proxy: FaultProxy) -> None:  # type: ignore[no-untyped-def]
    throttle, config = throttled(proxy, rate=4)
    data = random.Random(7).randbytes(
        6 * 5 * 1024 * 1024 + 1234
    )  # 7 parts: more than the limit admits at once

    with S3Client(config).open(f"s3://{bucket}/upload.bin", "wb") as writer:
        writer.write(data)
    state = {"weights": torch.arange(1000, dtype=torch.float32), "step": 7}
    torchdata_s3.save(state, f"s3://{bucket}/checkpoint.pt", config=config)

    stored = boto_s3.get_object(Bucket=bucket, Key="upload.bin")["Body"].read()
    assert hashlib.sha256(stored).digest() == hashlib.sha256(data).digest()
    restored = torch.load(io.BytesIO(boto_s3.get_object(Bucket=bucket, Key="checkpoint.pt")["Body"].read()))
    assert torch.equal(restored["weights"], state["weights"]) and restored["step"] == 7
    assert boto_s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    assert throttle.refused


def test_a_request_throttled_without_end_fails_typed_after_max_throttle_retries(
    boto_s3, bucket: str, proxy: FaultProxy
) -> None:  # type: ignore[no-untyped-def]
    boto_s3.put_object(Bucket=bucket, Key="obj", Body=body(0))
    proxy.force(Fault.SLOW_DOWN, 100)
    config = S3Config.resolve(endpoint_url=proxy.endpoint_url, max_retries=1, max_throttle_retries=3)

    with pytest.raises(S3Error) as caught:
        list(S3FileLoader(IterableWrapper([f"s3://{bucket}/obj"]), config=config))

    assert caught.value.crt_error == "AWS_ERROR_S3_SLOW_DOWN", repr(caught.value)
    assert proxy.attempts(f"/{bucket}/obj") == 4  # throttling has its own budget, apart from max_retries
