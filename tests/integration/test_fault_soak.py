"""Random reads, seeks and writes under random faults on every request: each operation ends with exact bytes
or a typed S3Error naming its URL; never wrong or short bytes, another exception, a hang or a crash.

The other fault tests aim one fault at one request. This one lets faults fall where they will across every
request type the product sends (ranged and suffix GETs, HEADs, the second GET of an empty object, PUTs,
multipart uploads), so that the CRT's failure paths run in combinations nobody listed. scripts/sanitize.sh
runs it under ASan and UBSan with the CRT's own assertions on: that is where a crash hides. (One did: the
CRT dereferenced missing headers when an empty object's second request failed; cmake/AwsCrtPatches.cmake.)
A fixed seed keeps each run's faults and operations the same.
"""

from __future__ import annotations

import collections
import random
from collections.abc import Iterator
from typing import Callable

import pytest

from tests.fault_proxy import Fault, FaultProxy, any_request
from tests.s3_server import MotoServer
from torchdata_s3 import S3Client, S3Config, S3Error

pytestmark = pytest.mark.integration

PART = 64 * 1024  # the smallest part size: multi-part objects stay small
SIZES = [0, 1, 100, PART - 1, PART, PART + 1, 3 * PART - 7, 5 * PART + 3]
WRITE_SIZES = [0, 10, 100_000, 6 * 1024 * 1024]  # the last one a multipart upload (threshold 1 MiB)
OPERATIONS = 120
FAULT_RATES = {Fault.SLOW_DOWN: 0.08, Fault.INTERNAL_ERROR: 0.04, Fault.DROP: 0.08, Fault.CUT_BODY: 0.08}


@pytest.fixture
def proxy(moto_server: MotoServer, s3_endpoint: str) -> Iterator[FaultProxy]:
    with FaultProxy(moto_server.port, seed=21, stall_s=5) as running:
        yield running


Check = Callable[[S3Client, str, bytes, random.Random], None]


def read_whole(client: S3Client, url: str, data: bytes, rng: random.Random) -> None:
    with client.open(url) as stream:
        assert stream.read() == data


def read_at_two_places(client: S3Client, url: str, data: bytes, rng: random.Random) -> None:
    with client.open(url) as stream:
        for _ in range(2):
            at, size = rng.randint(0, len(data)), rng.randint(0, 3 * PART)
            stream.seek(at)
            assert stream.read(size) == data[at : at + size]


def read_the_tail(client: S3Client, url: str, data: bytes, rng: random.Random) -> None:
    size = min(rng.randint(1, 2 * PART), len(data))
    with client.open(url) as stream:
        stream.seek(-size, 2)
        assert stream.read() == data[len(data) - size :]


def read_in_pieces(client: S3Client, url: str, data: bytes, rng: random.Random) -> None:
    pieces = []
    with client.open(url) as stream:
        while piece := stream.read(rng.randint(1, PART)):
            pieces.append(piece)
    assert b"".join(pieces) == data


def read_some_then_close(client: S3Client, url: str, data: bytes, rng: random.Random) -> None:
    size = rng.randint(0, len(data))
    with client.open(url) as stream:
        assert stream.read(size) == data[:size]


def size_from_the_end(client: S3Client, url: str, data: bytes, rng: random.Random) -> None:
    with client.open(url) as stream:
        assert stream.seek(0, 2) == len(data)


def write_whole(client: S3Client, url: str, data: bytes, rng: random.Random) -> None:
    with client.open(url, "wb") as writer:
        writer.write(data)


READS: list[Check] = [
    read_whole,
    read_at_two_places,
    read_the_tail,
    read_in_pieces,
    read_some_then_close,
    size_from_the_end,
]


def test_random_operations_under_random_faults_end_exact_or_typed(
    boto_s3, bucket: str, proxy: FaultProxy
) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(5)
    objects = {}
    for index, size in enumerate(SIZES):
        objects[f"s3://{bucket}/read/{index}"] = data = rng.randbytes(size)
        boto_s3.put_object(Bucket=bucket, Key=f"read/{index}", Body=data)
    written: dict[str, bytes | None] = {}  # what each written key held after its last write
    proxy.set_rates(FAULT_RATES, eligible=any_request)

    outcomes: collections.Counter[str] = collections.Counter()
    for number in range(OPERATIONS):
        config = S3Config.resolve(
            endpoint_url=proxy.endpoint_url,
            part_size_bytes=PART,
            multipart_threshold_bytes=1024 * 1024,
            max_retries=rng.randint(0, 3),
        )
        client = S3Client(config)
        if rng.random() < 0.15:
            check: Check = write_whole
            url = f"s3://{bucket}/write/{number % 3}"
            data = rng.randbytes(rng.choice(WRITE_SIZES))
        else:
            check = rng.choice(READS)
            url = rng.choice(sorted(objects))
            data = objects[url]
        try:
            check(client, url, data, rng)
        except S3Error as error:
            assert error.url == url, f"{check.__name__}: {error!r} names another object than {url}"
            outcomes["typed failure"] += 1
            succeeded = False
        else:
            outcomes["exact"] += 1
            succeeded = True
        if check is write_whole:
            # Success or failure, the object is a whole version: this write's, or the one before it (none
            # before the first). A failed write may still have landed: a fault can cut the answer to a
            # CompleteMultipartUpload that S3 carried out.
            key = url.split("/", 3)[3]
            listed = boto_s3.list_objects_v2(Bucket=bucket, Prefix=key).get("Contents", [])
            stored = boto_s3.get_object(Bucket=bucket, Key=key)["Body"].read() if listed else None
            assert stored == data if succeeded else stored in (data, written.get(url)), (
                f"{url} holds {len(stored or b'')} bytes, not what its writes sent (succeeded: {succeeded})"
            )
            written[url] = stored

    injected = proxy.injected
    print(f"{dict(outcomes)}; injected {dict(injected)} over {len(proxy.records)} requests")
    assert all(injected[fault] > 0 for fault in FAULT_RATES), injected
    assert outcomes["exact"] >= OPERATIONS // 2, outcomes  # retries repair most faults
    assert outcomes["typed failure"] > 0, outcomes  # max_retries=0 leaves some faults unrepaired
