"""A listing's size goes to the CRT as its object_size_hint: an object smaller than a part comes in one GET
of its own size (a buffer of 110 kB, not of a part), whatever the store, and a size that went stale after the
listing never costs a byte.

The CRT's own use of the hint (`GET ?partNumber=1`) failed on stores that ignore the query, as nginx does
(no Content-Range in the answer: AWS_ERROR_S3_MISSING_CONTENT_RANGE_HEADER); the patch "an object_size_hint
sends GET ?partNumber=1" (cmake/AwsCrtPatches.cmake) asks for `Range: bytes=0-(hint-1)` instead.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from torch.utils.data.datapipes.iter import IterableWrapper

from benchmarks.endpoint.nginx import LocalEndpoint, ensure_nginx_installed
from tests.fault_proxy import FaultProxy
from tests.s3_server import MotoServer
from torchdata_s3 import S3Client, S3Config, S3FileLoader
from torchdata_s3.client import native_client
from torchdata_s3.url import S3Url

pytestmark = pytest.mark.integration

MIB = 1024 * 1024
PART = 8 * MIB
SIZES = {"small/one-byte": 1, "small/image": 110_000, "small/just-under-a-part": PART - 1}


def payload(seed: int, size: int) -> bytes:
    return random.Random(seed).randbytes(size)


@pytest.fixture
def proxy(moto_server: MotoServer, s3_endpoint: str) -> Iterator[FaultProxy]:
    with FaultProxy(moto_server.port) as running:
        yield running


def test_a_listed_object_smaller_than_a_part_comes_in_one_ranged_get_of_its_size(  # type: ignore[no-untyped-def]
    boto_s3, bucket: str, proxy: FaultProxy
) -> None:
    objects = {key: payload(seed, size) for seed, (key, size) in enumerate(SIZES.items())}
    for key, data in objects.items():
        boto_s3.put_object(Bucket=bucket, Key=key, Body=data)
    config = S3Config.resolve(endpoint_url=proxy.endpoint_url, part_size_bytes=PART)

    loaded = {
        url: stream.read()
        for url, stream in S3FileLoader(IterableWrapper([f"s3://{bucket}/small/"]), config=config)
    }

    assert loaded == {f"s3://{bucket}/{key}": data for key, data in objects.items()}
    gets = {record.path: record for record in proxy.records if record.path.startswith(f"/{bucket}/small/")}
    assert sorted(gets) == sorted(f"/{bucket}/{key}" for key in objects)
    for key, size in SIZES.items():
        record = gets[f"/{bucket}/{key}"]
        assert record.range == f"bytes=0-{size - 1}"
        assert "partNumber" not in record.query
    assert proxy.attempts(f"/{bucket}/small/image") == 1


def test_list_then_load_passes_the_listing_sizes_along(  # type: ignore[no-untyped-def]
    boto_s3, bucket: str, proxy: FaultProxy
) -> None:
    """``list_files_by_s3().sharding_filter().load_files_by_s3()`` hands the loader plain URLs: it finds the
    lister upstream and takes each object's size from its listing, as it does for a prefix it lists itself."""
    objects = {key: payload(seed, size) for seed, (key, size) in enumerate(SIZES.items())}
    for key, data in objects.items():
        boto_s3.put_object(Bucket=bucket, Key=key, Body=data)
    config = S3Config.resolve(endpoint_url=proxy.endpoint_url, part_size_bytes=PART)
    client = native_client(config)
    landed_before = client.landed_bytes

    pipe = IterableWrapper([f"s3://{bucket}/small/"]).list_files_by_s3(config=config)
    pipe = pipe.sharding_filter().load_files_by_s3(config=config)
    loaded = {url: stream.read() for url, stream in pipe}

    assert loaded == {f"s3://{bucket}/{key}": data for key, data in objects.items()}
    for key, size in SIZES.items():
        [record] = [r for r in proxy.records if r.path == f"/{bucket}/{key}"]
        assert record.range == f"bytes=0-{size - 1}"
    assert client.landed_bytes - landed_before == sum(SIZES.values())


def test_urls_changed_on_the_way_are_loaded_without_a_size(  # type: ignore[no-untyped-def]
    boto_s3, bucket: str, proxy: FaultProxy
) -> None:
    """A map between lister and loader may name other objects: only URLs the lister yielded get its sizes."""
    boto_s3.put_object(Bucket=bucket, Key="small/image", Body=b"listed")
    boto_s3.put_object(Bucket=bucket, Key="other/image", Body=b"not listed, and larger")
    config = S3Config.resolve(endpoint_url=proxy.endpoint_url, part_size_bytes=PART)

    pipe = IterableWrapper([f"s3://{bucket}/small/"]).list_files_by_s3(config=config)
    pipe = pipe.map(functools.partial(re.sub, "/small/", "/other/")).load_files_by_s3(config=config)

    assert [stream.read() for _url, stream in pipe] == [b"not listed, and larger"]
    [record] = [r for r in proxy.records if r.path == f"/{bucket}/other/image"]
    assert record.range == f"bytes=0-{PART - 1}"  # the CRT's first part, as for any URL of unknown size


@pytest.mark.parametrize(
    ("actual_size", "hint"),
    [
        (3 * PART + 5, 1000),  # the object grew after the listing: the rest in ranged parts, no retry
        (PART + 1, PART - 1),  # just past one part
        (1000, 100_000),  # it shrank: the answer is shorter than asked, and exact
        (1000, 999),  # one byte more than the hint
    ],
)
def test_a_stale_size_hint_still_reads_the_object_exactly(  # type: ignore[no-untyped-def]
    boto_s3, bucket: str, actual_size: int, hint: int
) -> None:
    data = payload(actual_size, actual_size)
    boto_s3.put_object(Bucket=bucket, Key="changed", Body=data)
    client = S3Client(S3Config.resolve(part_size_bytes=PART))

    stream = client.open_native(S3Url(bucket, "changed"), size_hint=hint)

    assert stream.read(-1) == data
    assert stream.read(-1) == b""


def test_a_store_that_ignores_part_numbers_serves_listed_objects(tmp_path: Path) -> None:
    """nginx answers `?partNumber=1` with the whole object and no Content-Range, as plain HTTP stores do."""
    ensure_nginx_installed()
    objects = {key: payload(seed, size) for seed, (key, size) in enumerate(SIZES.items())}
    for key, data in objects.items():
        path = tmp_path / "hinted" / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    with LocalEndpoint(tmp_path) as endpoint:
        config = S3Config.resolve(endpoint_url=endpoint.endpoint_url, part_size_bytes=PART)

        loaded = {
            url: stream.read()
            for url, stream in S3FileLoader(IterableWrapper(["s3://hinted/small/"]), config=config)
        }

    assert loaded == {f"s3://hinted/{key}": data for key, data in objects.items()}
