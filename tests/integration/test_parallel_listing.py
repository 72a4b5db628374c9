"""Listing with many ListObjectsV2 requests in flight (torchdata_s3/listing.py), against the moto server:
every key once, in S3's order, whatever the shape of the key space; a server that refuses StartAfter; a page
that fails; SlowDown. Small pages (7 keys) make a few hundred keys take many pages and many splits."""

from __future__ import annotations

import gc
import hashlib
import logging
import os
import random
import signal
import time
from collections.abc import Iterator

import boto3
import pytest

from tests.conftest import TEST_ACCESS_KEY, TEST_SECRET_KEY
from tests.fault_proxy import Fault, FaultProxy, ProxiedRequest
from tests.s3_server import MotoServer
from torchdata_s3 import S3Client, S3Config, S3Error
from torchdata_s3.client import native_client
from torchdata_s3.listing import ParallelListing
from torchdata_s3.url import parse_s3_url

pytestmark = pytest.mark.integration

PAGE = 7


def flat_keys() -> list[str]:
    return [f"flat/{hashlib.sha256(str(n).encode()).hexdigest()[:16]}.bin" for n in range(400)]


def numbered_keys() -> list[str]:
    return [f"numbered/img-{n:05d}.jpg" for n in range(300)]


def tree_keys() -> list[str]:
    keys = [f"tree/class{c:02d}/{n:03d}.jpg" for c in range(12) for n in range(9 + 2 * c)]
    keys += [f"tree/class03/deeper/{n}.txt" for n in range(15)]
    # Names that sort around the delimiter: "." < "/" < "0"; a folder marker; an empty folder name; unicode;
    # characters below "/" and above "z".
    keys += ["tree/a.txt", "tree/a/", "tree/a/b", "tree/a0", "tree/a//c", "tree/!bang", "tree/-dash"]
    keys += ["tree/\u00e9t\u00e9/\u00fc.bin", "tree/\u00e9t\u00e9.txt", "tree/~tilde", "tree/zz/top"]
    # Spaces, "+", "%", and a key of S3's full 1,024 bytes. (A line break: moto cannot store one; the parser's
    # round trip of control characters is the list_objects_v2 fuzz property.)
    keys += ["tree/with space/x", "tree/plus+sign", "tree/per%cent%2F", "tree/" + "k" * 1019]
    return keys


def skewed_keys() -> list[str]:
    # One folder, among small ones, holds 90% of the keys: it must be split, not listed a page at a time after
    # the others; listed together with small ones, it must be handed a range of its own.
    keys = [f"skewed/big/{n:04d}.bin" for n in range(270)]
    return keys + [f"skewed/{'a' if f < 5 else 'z'}{f}/{n}.bin" for f in range(10) for n in range(3)]


def random_keys() -> list[str]:
    # Folders of every size from 1 to 120 keys, nested up to three deep, with keys between them and names that
    # sort around the delimiter: whatever ranges, groups and hand-overs a listing makes of it, each key once.
    rng = random.Random(21)
    keys: list[str] = []

    def fill(folder: str, depth: int, folders: int) -> None:
        for index in range(folders):
            name = f"{folder}{rng.choice(['d', 'd.', 'd-', 'e'])}{index}"
            if depth < 3 and rng.random() < 0.35:
                fill(name + "/", depth + 1, rng.choice([1, 2, 3, 5, 8]))
            else:
                keys.extend(f"{name}/{n:03d}" for n in range(rng.choice([1, 2, 3, 7, 40, 120])))
            if rng.random() < 0.3:
                keys.append(name + rng.choice(["", ".txt", "0", "/"]))

    fill("random/", 1, 14)
    return sorted(set(keys))


SHAPES = {
    "flat": flat_keys(),
    "numbered": numbered_keys(),
    "tree": tree_keys(),
    "skewed": skewed_keys(),
    "random": random_keys(),
}


@pytest.fixture(scope="module")
def shaped_bucket(moto_server: MotoServer) -> Iterator[str]:
    # Module-scoped, so no test here asks for `s3_endpoint` (it resets the server): configs name the
    # endpoint themselves.
    s3 = boto3.client(
        "s3",
        endpoint_url=moto_server.endpoint_url,
        region_name="us-east-1",
        aws_access_key_id=TEST_ACCESS_KEY,
        aws_secret_access_key=TEST_SECRET_KEY,
    )
    name = "parallel-listing"
    s3.create_bucket(Bucket=name)
    for keys in SHAPES.values():
        for key in keys:
            s3.put_object(Bucket=name, Key=key, Body=key.encode()[: len(key) % 5])
    yield name


@pytest.fixture
def direct(moto_server: MotoServer) -> S3Config:
    return S3Config.resolve(endpoint_url=moto_server.endpoint_url)


def one_stream(config: S3Config, bucket: str, prefix: str) -> list[tuple[str, int]]:
    config = config.replace(max_list_requests=1)
    return [(o.key, o.size) for o in S3Client(config).list_objects(f"s3://{bucket}/{prefix}", page_size=PAGE)]


def listing_of(url: str, config: S3Config, max_requests: int = 16) -> ParallelListing:
    """A parallel listing of `url` in 7-key pages, raising each page's failure as it is."""
    return ParallelListing(
        native_client(config),
        parse_s3_url(url),
        max_requests=max_requests,
        page_size=PAGE,
        timeout_ms=config.request_timeout_ms,
        failure_of=lambda error: error,
    )


def in_parallel(
    url: str, config: S3Config, max_requests: int = 16
) -> tuple[list[tuple[str, int]], ParallelListing]:
    listing = listing_of(url, config, max_requests)
    return [(key, size) for key, size, _etag in listing], listing


@pytest.mark.parametrize(
    "prefix",
    [
        "flat/",
        "numbered/",
        "tree/",
        "skewed/",
        "random/",
        "",
        "tree/a",
        "tree/class0",
        "numbered/img-001",
        "nothing/",
    ],
)
# Two requests: fewer than the folders a page names, so small folders are listed together.
@pytest.mark.parametrize("max_requests", [16, 2])
def test_every_key_once_in_order_whatever_the_shape(
    shaped_bucket: str, direct: S3Config, prefix: str, max_requests: int
) -> None:
    every_key = [key for keys in SHAPES.values() for key in keys]
    expected = sorted((key, len(key.encode()[: len(key) % 5])) for key in every_key if key.startswith(prefix))
    assert one_stream(direct, shaped_bucket, prefix) == expected  # what S3 (moto) answers one page at a time
    listed, listing = in_parallel(f"s3://{shaped_bucket}/{prefix}", direct, max_requests)
    assert listed == expected
    if len(expected) > 4 * PAGE:
        assert listing.peak_in_flight > 1, "the listing never had two requests in flight"


@pytest.mark.parametrize("shape", ["flat", "numbered", "skewed"])
def test_a_flat_key_space_is_split(shaped_bucket: str, direct: S3Config, shape: str) -> None:
    listed, listing = in_parallel(f"s3://{shaped_bucket}/{shape}/", direct)
    assert [key for key, _size in listed] == sorted(SHAPES[shape])
    assert listing.splits > 0
    pages = -(-len(SHAPES[shape]) // PAGE)
    # Splits cost requests where a guess found no keys; not several times the pages.
    assert listing.requests < 2 * pages, (listing.requests, pages)


@pytest.mark.parametrize("shape", ["tree", "skewed", "random"])
def test_small_folders_are_listed_together(shaped_bucket: str, direct: S3Config, shape: str) -> None:
    # The first page shows folders of 3 keys (skewed) or 1-3 (tree, where it also meets keys beside folders):
    # with fewer requests than folders to ask for, runs of them are one range each, a big folder among them
    # (skewed/big/) is handed a range of its own and split.
    listed, listing = in_parallel(f"s3://{shaped_bucket}/{shape}/", direct, max_requests=2)
    assert [key for key, _size in listed] == sorted(SHAPES[shape])
    assert listing.groups > 0
    folders = {key[: key.index("/", len(shape) + 1) + 1] for key in SHAPES[shape] if key.count("/") > 1}
    listed_one_by_one, one_by_one = in_parallel(f"s3://{shaped_bucket}/{shape}/", direct, max_requests=16)
    assert listed_one_by_one == listed
    assert one_by_one.groups == 0  # 16 requests: every folder its own
    assert listing.requests < one_by_one.requests, (listing.requests, one_by_one.requests, len(folders))
    if shape == "skewed":
        assert listing.splits > 0


def test_every_door_lists_in_parallel_by_default(shaped_bucket: str, direct: S3Config) -> None:
    # S3Client.list_location(read_ahead=True) is what the lister, the loader and the datasets call.
    client = S3Client(direct)
    listed = [o.key for o in client.list_location(parse_s3_url(f"s3://{shaped_bucket}/"), read_ahead=True)]
    assert listed == sorted(key for keys in SHAPES.values() for key in keys)


def test_a_reader_that_stops_early_cancels_what_is_in_flight(shaped_bucket: str, direct: S3Config) -> None:
    # Requests still in flight when the reader stops are cancelled; their answers, arriving later on CRT
    # threads, find nothing freed under them (the sanitizer run includes this file). A second listing on the
    # same native client then works as usual.
    batches = listing_of(f"s3://{shaped_bucket}/flat/", direct).batches()
    first = [key for key, _size, _etag in next(batches)]
    second = next(batches)
    assert first == sorted(flat_keys())[:PAGE] and second
    batches.close()  # while later pages are in flight
    listed, _listing = in_parallel(f"s3://{shaped_bucket}/flat/", direct)
    assert [key for key, _size in listed] == sorted(flat_keys())


def test_a_child_made_by_fork_drops_the_listings_it_inherited_and_lists_again(
    shaped_bucket: str, direct: S3Config
) -> None:
    # The parent's listings' completion queues have threads, which a child made by fork() does not have: the
    # child must be able to drop those listings (their queues leave the thread alone instead of joining it),
    # one finished and one with pages in flight, and list on its own.
    finished = listing_of(f"s3://{shaped_bucket}/numbered/", direct)
    assert [key for key, _size, _etag in finished] == sorted(numbered_keys())
    in_progress = listing_of(f"s3://{shaped_bucket}/flat/", direct)
    batches = in_progress.batches()
    next(batches)
    next(batches)
    # Fork once every page in flight is in and parsed: the queue's thread then waits on its condition variable
    # (what the child must not destroy), and no thread is inside malloc (GCC 12's ASan, in the sanitizer run,
    # has no fork handling: a child forked while another thread held its allocator's lock hung in CI).
    deadline = time.monotonic() + 30
    while not all(request.done for _range, request, _with in in_progress._in_flight.values()):
        assert time.monotonic() < deadline, "the pages in flight never came"
        time.sleep(0.01)
    assert in_progress._in_flight, "nothing in flight: the fork would not test an inherited listing"
    pid = os.fork()
    if pid == 0:  # the child: report through the exit status only
        status = 1
        try:
            del finished
            batches.close()
            del batches, in_progress
            gc.collect()
            listed, _listing = in_parallel(f"s3://{shaped_bucket}/flat/", direct)
            status = 0 if [key for key, _size in listed] == sorted(flat_keys()) else 2
        finally:
            os._exit(status)
    deadline = time.monotonic() + 60
    while True:
        finished, wait_status = os.waitpid(pid, os.WNOHANG)
        if finished:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung on the listing it inherited")
        time.sleep(0.05)
    assert os.waitstatus_to_exitcode(wait_status) == 0
    listed, _listing = in_parallel(f"s3://{shaped_bucket}/flat/", direct)  # the parent goes on too
    assert [key for key, _size in listed] == sorted(flat_keys())
    batches.close()


# ---- faults, through the fault proxy in front of the same server ------------------------------------------


@pytest.fixture
def proxy(moto_server: MotoServer) -> Iterator[FaultProxy]:
    with FaultProxy(moto_server.port, seed=3, stall_s=60) as running:
        yield running


def is_listing(request: ProxiedRequest) -> bool:
    return request.method == "GET" and "list-type=2" in request.query


def with_start_after(request: ProxiedRequest) -> bool:
    return is_listing(request) and "start-after=" in request.query


def test_a_server_refusing_start_after_gets_one_stream_of_pages(
    shaped_bucket: str, proxy: FaultProxy, caplog: pytest.LogCaptureFixture
) -> None:
    # S3 Express directory buckets answer 400 InvalidArgument to StartAfter.
    proxy.set_rates({Fault.INVALID_ARGUMENT: 1.0}, eligible=with_start_after)
    config = S3Config.resolve(endpoint_url=proxy.endpoint_url)
    with caplog.at_level(logging.WARNING, logger="torchdata_s3.listing"):
        listed, _listing = in_parallel(f"s3://{shaped_bucket}/tree/", config)
    assert [key for key, _size in listed] == sorted(key for key in tree_keys())
    assert any("refused ListObjectsV2's StartAfter" in record.message for record in caplog.records)


def test_a_failed_range_raises_after_every_key_before_it(shaped_bucket: str, proxy: FaultProxy) -> None:
    proxy.set_rates({Fault.INTERNAL_ERROR: 1.0}, eligible=with_start_after)
    config = S3Config.resolve(endpoint_url=proxy.endpoint_url, max_retries=0)
    listing = listing_of(f"s3://{shaped_bucket}/flat/", config)
    yielded = []
    with pytest.raises(S3Error) as raised:
        for key, _size, _etag in listing:
            yielded.append(key)
    # The first page (no StartAfter) came; the range after it failed, and was raised at its turn.
    assert yielded == sorted(flat_keys())[:PAGE]
    assert raised.value.crt_error == "AWS_ERROR_S3_INTERNAL_ERROR"
    assert "flat/" in str(raised.value)
    assert f"the listing stopped after s3://{shaped_bucket}/{yielded[-1]}" in str(raised.value)


def test_slow_down_beyond_the_crt_retries_backs_off_and_completes(
    shaped_bucket: str, proxy: FaultProxy
) -> None:
    proxy.set_rates({Fault.SLOW_DOWN: 0.3}, eligible=is_listing)
    config = S3Config.resolve(endpoint_url=proxy.endpoint_url, max_retries=0)
    listed, listing = in_parallel(f"s3://{shaped_bucket}/numbered/", config)
    assert [key for key, _size in listed] == numbered_keys()
    assert proxy.injected[Fault.SLOW_DOWN] > 0
    assert listing.fewest_requests < 16, "SlowDown did not reduce the requests in flight"
