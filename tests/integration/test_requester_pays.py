"""Requester Pays buckets refuse every request without ``x-amz-request-payer: requester`` (403). With
``S3Config(requester_pays=True)`` every request carries it, including the ones the CRT derives from ours
(ranged GET parts, CreateMultipartUpload, UploadPart, CompleteMultipartUpload). The fault proxy records each
request's headers on its way to the moto server (it injects no fault here)."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from tests.fault_proxy import FaultProxy
from tests.s3_server import MotoServer
from torchdata_s3 import S3Client, S3Config
from torchdata_s3.fsspec import S3FileSystem

pytestmark = pytest.mark.integration

PART = 5 * 1024 * 1024  # the smallest multipart part S3 accepts


@pytest.fixture
def proxy(moto_server: MotoServer, s3_endpoint: str) -> Iterator[FaultProxy]:
    with FaultProxy(moto_server.port, seed=1) as running:
        yield running


def every_kind_of_request(client: S3Client, bucket: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    data = random.Random(1).randbytes(2 * PART + 11)  # two parts and a short one, read and written
    with client.open(f"s3://{bucket}/rp/big", "wb") as writer:
        writer.write(data)
    with client.open(f"s3://{bucket}/rp/small", "wb") as writer:
        writer.write(b"small")
    assert client.open(f"s3://{bucket}/rp/big").read() == data
    assert client.head(f"s3://{bucket}/rp/small").size == 5
    assert sorted(o.key for o in client.list_objects(f"s3://{bucket}/rp/")) == ["rp/big", "rp/small"]
    client.copy(f"s3://{bucket}/rp/small", f"s3://{bucket}/rp/copy")
    client.download_file(f"s3://{bucket}/rp/big", tmp_path / "big")
    client.upload_file(tmp_path / "big", f"s3://{bucket}/rp/again")
    client.delete(f"s3://{bucket}/rp/copy")
    client.delete_many([f"s3://{bucket}/rp/small", f"s3://{bucket}/rp/again"])


def test_every_request_says_the_requester_pays(proxy: FaultProxy, bucket: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    config = S3Config.resolve(
        endpoint_url=proxy.endpoint_url,
        part_size_bytes=PART,
        multipart_threshold_bytes=PART,
        requester_pays=True,
    )
    every_kind_of_request(S3Client(config), bucket, tmp_path)

    operations = {(record.method, record.query.split("=")[0]) for record in proxy.records}
    assert len(proxy.records) >= 15 and len(operations) >= 6, operations  # parts, uploads, listings, ...
    assert all(record.headers.get("x-amz-request-payer") == "requester" for record in proxy.records), [
        (record.method, record.path, record.query)
        for record in proxy.records
        if "x-amz-request-payer" not in record.headers
    ]


def test_without_it_no_request_says_so(proxy: FaultProxy, bucket: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    config = S3Config.resolve(
        endpoint_url=proxy.endpoint_url, part_size_bytes=PART, multipart_threshold_bytes=PART
    )
    every_kind_of_request(S3Client(config), bucket, tmp_path)

    assert proxy.records and not any("x-amz-request-payer" in record.headers for record in proxy.records)


def test_fsspecs_requester_pays_option_is_honoured(proxy: FaultProxy, bucket: str) -> None:
    fs = S3FileSystem(endpoint_url=proxy.endpoint_url, requester_pays=True, skip_instance_cache=True)
    fs.pipe_file(f"{bucket}/rp/fs", b"abc")
    assert fs.cat_file(f"{bucket}/rp/fs") == b"abc"
    assert fs.config.requester_pays
    assert proxy.records and all(r.headers.get("x-amz-request-payer") == "requester" for r in proxy.records)


def test_list_buckets_goes_to_the_endpoint_itself(proxy: FaultProxy, bucket: str) -> None:
    client = S3Client(S3Config.resolve(endpoint_url=proxy.endpoint_url, requester_pays=True))
    names = [name for name, _created in client.list_buckets()]
    assert bucket in names
    [record] = proxy.records
    assert (record.method, record.path, record.query) == ("GET", "/", "")
    assert record.headers.get("x-amz-request-payer") == "requester"
