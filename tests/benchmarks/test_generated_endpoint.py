"""The generated-keys listing endpoint (listing-scale's): S3's ListObjectsV2 semantics, seen through boto3;
and the workload's adapters, each listing it through the harness."""

from __future__ import annotations

import argparse
import http.client
import io
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from benchmarks import listing_scale
from benchmarks.clients import CLIENTS, load
from benchmarks.clients.common import Context, consume_listing, ordered_digest
from benchmarks.endpoint.generated_keys import SHAPES, key_space
from benchmarks.endpoint.generated_server import GeneratedEndpoint
from benchmarks.progress import Progress

pytestmark = pytest.mark.integration

KEYS = 2500  # tree: 2 full folders and a half one; skewed: 1,000 folders, one of 2,250 keys
ROOT = "odd & <root> ü+%/"  # every key starts with it: XML escaping and URL encoding on every key


def client(endpoint: GeneratedEndpoint, attempts: int = 1):  # type: ignore[no-untyped-def]
    return boto3.client(
        "s3",
        endpoint_url=endpoint.endpoint_url,
        aws_access_key_id="x",
        aws_secret_access_key="y",
        region_name="us-east-1",
        config=Config(
            s3={"addressing_style": "path"}, retries={"total_max_attempts": attempts, "mode": "standard"}
        ),
    )


@pytest.fixture(scope="module")
def endpoint() -> Iterator[GeneratedEndpoint]:
    with GeneratedEndpoint(KEYS, latency_ms=0, root=ROOT) as started:
        yield started


def expected(shape: str) -> list[str]:
    return key_space(shape, KEYS, ROOT).keys(0, KEYS)


def list_all(s3, bucket: str, **parameters: object) -> tuple[list[str], list[str], int]:  # type: ignore[no-untyped-def]
    """Every key and common prefix, page by page (continuation tokens), and the number of pages."""
    keys: list[str] = []
    prefixes: list[str] = []
    pages = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, **parameters):
        pages += 1
        assert page["KeyCount"] == len(page.get("Contents", [])) + len(page.get("CommonPrefixes", []))
        keys += [entry["Key"] for entry in page.get("Contents", [])]
        prefixes += [entry["Prefix"] for entry in page.get("CommonPrefixes", [])]
    return keys, prefixes, pages


@pytest.mark.parametrize("shape", SHAPES)
def test_every_key_once_in_utf8_byte_order(endpoint: GeneratedEndpoint, shape: str) -> None:
    keys, prefixes, pages = list_all(client(endpoint), shape)
    assert keys == expected(shape)
    assert keys == sorted(keys, key=lambda key: key.encode("utf-8"))
    assert len(set(keys)) == KEYS and not prefixes and pages == 3
    assert all(key.startswith(ROOT) for key in keys)


def test_page_fields_and_metadata(endpoint: GeneratedEndpoint) -> None:
    s3 = client(endpoint)
    page = s3.list_objects_v2(Bucket="flat", MaxKeys=7)
    assert page["KeyCount"] == 7 and page["IsTruncated"] and page["NextContinuationToken"]
    assert page["MaxKeys"] == 7
    entry = page["Contents"][0]
    assert entry["Size"] > 0 and entry["ETag"].startswith('"') and entry["LastModified"].year == 2026
    last = s3.list_objects_v2(Bucket="flat", StartAfter=expected("flat")[-2])
    assert [e["Key"] for e in last["Contents"]] == expected("flat")[-1:]
    assert not last["IsTruncated"] and "NextContinuationToken" not in last
    assert s3.list_objects_v2(Bucket="flat", MaxKeys=5000)["KeyCount"] == 1000  # S3's page limit


def test_prefix(endpoint: GeneratedEndpoint) -> None:
    s3 = client(endpoint)
    every = expected("tree")
    folder = every[1000][: every[1000].rindex("/") + 1]
    keys, _, _ = list_all(s3, "tree", Prefix=folder)
    assert keys == [key for key in every if key.startswith(folder)] and len(keys) == 1000
    partial = every[1234][:-6]  # ends inside the file names: keys 1230-1239
    keys, _, _ = list_all(s3, "tree", Prefix=partial)
    assert keys == [key for key in every if key.startswith(partial)] and len(keys) == 10
    assert list_all(s3, "tree", Prefix=ROOT + "nothing/")[0] == []
    assert list_all(s3, "tree", Prefix=ROOT + "train/n~")[0] == []  # after every key


def test_delimiter_rolls_up_folders(endpoint: GeneratedEndpoint) -> None:
    s3 = client(endpoint)
    every = expected("skewed")
    folders = sorted({key[: key.rindex("/") + 1] for key in every})
    keys, prefixes, pages = list_all(s3, "skewed", Prefix=ROOT + "train/", Delimiter="/")
    assert keys == [] and prefixes == folders and len(folders) == 251 and pages == 1
    keys, prefixes, pages = list_all(s3, "skewed", Prefix=ROOT + "train/", Delimiter="/", MaxKeys=100)
    assert prefixes == folders and pages == 3  # common prefixes count against max-keys
    keys, prefixes, _ = list_all(s3, "skewed", Delimiter="/")
    assert prefixes == [ROOT] and keys == []
    keys, prefixes, _ = list_all(s3, "tree", Prefix=ROOT + "train/", Delimiter="_0")
    assert keys == [] and len(prefixes) == 3  # any delimiter, not only "/"


def test_start_after_is_exclusive_and_the_token_wins(endpoint: GeneratedEndpoint) -> None:
    s3 = client(endpoint)
    every = expected("flat")
    keys, _, _ = list_all(s3, "flat", StartAfter=every[1500])
    assert keys == every[1501:]
    between = every[1500][:-5] + "~"  # not a key: sorts between two keys
    assert list_all(s3, "flat", StartAfter=between)[0] == [k for k in every if k > between]
    first = s3.list_objects_v2(Bucket="flat", MaxKeys=10)
    token = first["NextContinuationToken"]
    after = s3.list_objects_v2(Bucket="flat", ContinuationToken=token, StartAfter=every[2000], MaxKeys=10)
    assert [e["Key"] for e in after["Contents"]] == every[10:20]
    assert after["StartAfter"] == every[2000]  # echoed (escaped, then decoded by boto3), but not used
    with pytest.raises(ClientError) as refused:
        s3.list_objects_v2(Bucket="flat", ContinuationToken="not a token!")
    assert refused.value.response["Error"]["Code"] == "InvalidArgument"


def test_max_keys_pages(endpoint: GeneratedEndpoint) -> None:
    keys, _, pages = list_all(client(endpoint), "tree", PaginationConfig={"PageSize": 333})
    assert keys == expected("tree") and pages == 8


def test_unknown_bucket_and_object_requests(endpoint: GeneratedEndpoint) -> None:
    s3 = client(endpoint)
    with pytest.raises(ClientError) as missing:
        s3.list_objects_v2(Bucket="nope")
    assert missing.value.response["Error"]["Code"] == "NoSuchBucket"
    s3.head_bucket(Bucket="tree")
    with pytest.raises(ClientError):
        s3.head_object(Bucket="tree", Key=expected("tree")[0])


def test_refuses_start_after_like_a_directory_bucket() -> None:
    with GeneratedEndpoint(100, latency_ms=0, refuse_start_after=True) as endpoint:
        s3 = client(endpoint)
        assert len(list_all(s3, "flat", PaginationConfig={"PageSize": 30})[0]) == 100  # tokens still work
        with pytest.raises(ClientError) as refused:
            s3.list_objects_v2(Bucket="flat", StartAfter="images/8")
        assert refused.value.response["Error"]["Code"] == "InvalidArgument"
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_slowdown_rate() -> None:
    with GeneratedEndpoint(100, latency_ms=0, slowdown_rate=0.5) as endpoint:
        s3 = client(endpoint)
        codes = []
        for _ in range(10):
            try:
                s3.list_objects_v2(Bucket="tree")
                codes.append("ok")
            except ClientError as error:
                codes.append(error.response["Error"]["Code"])
        assert codes.count("SlowDown") == 5 and codes.count("ok") == 5
        # boto3's own retries get through: the listing completes.
        assert len(list_all(client(endpoint, attempts=10), "tree")[0]) == 100
        log = endpoint.access_log.read_text().split()
        assert "503" in log and "200" in log


def test_latency_is_per_request_not_queued() -> None:
    """150 requests at once each wait the latency (not 150 x it): the waits overlap."""
    with GeneratedEndpoint(10_000, latency_ms=300) as endpoint:
        port = urlsplit(endpoint.endpoint_url).port
        seconds: list[float] = []

        def one(i: int) -> None:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            started = time.monotonic()
            connection.request("GET", f"/flat?list-type=2&max-keys=10&start-after=images/{i:02x}")
            assert connection.getresponse().read()
            seconds.append(time.monotonic() - started)
            connection.close()

        threads = [threading.Thread(target=one, args=(i,)) for i in range(150)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.monotonic() - started
        assert len(seconds) == 150 and min(seconds) >= 0.29
        assert wall < 3.0, f"150 requests of 300 ms took {wall:.2f} s: they queued"


# --- the listing-scale workload's adapters, through the harness's own path ----------------------------------

SCALE_CLIENTS = [name for name in CLIENTS if hasattr(load(name), "listing_scale")]


def test_every_listing_scale_adapter_lists_every_key_in_order(tmp_path: Path) -> None:
    """Each client's untimed check run (on the latency-free twin) lists exactly the key space, in order;
    then one timed round, whose first and last keys are checked."""
    assert {"torchdata_s3", "boto3", "s3fs", "s3torchconnector", "obstore"} <= set(SCALE_CLIENTS)
    arguments = argparse.Namespace(
        listing_keys=2345,
        listing_ten_million=False,
        listing_shapes="flat",
        listing_page_ms=5.0,
        rounds=1,
        timeout_s=120.0,
        output=tmp_path,
    )
    document = listing_scale.run(arguments, SCALE_CLIENTS, Progress(0, io.StringIO()))
    runs = document["runs"]
    assert [run["error"] for run in runs if run["error"]] == []
    assert {run["client"] for run in runs} == set(SCALE_CLIENTS)
    assert all(run["items"] == 2345 and run["extra"]["first_key_seconds"] > 0 for run in runs)
    assert document["meta"]["endpoint_capacity"]["flat 2,345"]["pages_per_s"] > 0
    assert "first key s" in listing_scale.first_key_table(document)


def test_a_partial_listing_is_not_timed_as_complete() -> None:
    context = Context("", "flat", "images/", [], expected_first_key="a", expected_last_key="c")
    assert consume_listing(iter(["a", "b", "c"]), context).items == 3
    with pytest.raises(RuntimeError, match="expected 'a' to 'c'"):
        consume_listing(iter(["a", "b"]), context)


def test_the_check_digest_sees_the_order() -> None:
    context = Context("", "flat", "images/", [], verify=True)
    assert consume_listing(iter(["a", "b"]), context).digest == ordered_digest(["a", "b"])
    assert ordered_digest(["a", "b"]) != ordered_digest(["b", "a"])
