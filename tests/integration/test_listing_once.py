"""list_files_once: the lister's answer, fetched once, so that DataLoader workers list nothing themselves."""

from __future__ import annotations

import hashlib
from collections import Counter

import pytest
from torch.utils.data import DataLoader
from torch.utils.data.datapipes.datapipe import IterDataPipe
from torch.utils.data.datapipes.iter import IterableWrapper

import torchdata_s3
from tests.integration.object_digests import digest_object
from tests.s3_server import MotoServer
from torchdata_s3 import S3Config

pytestmark = pytest.mark.integration

OBJECTS = 12
PAGE_SIZE = 2  # several ListObjectsV2 pages per listing, so that the request counts say something
WORKERS = 2


@pytest.fixture
def listed_bucket(boto_s3, bucket: str) -> dict[str, bytes]:  # type: ignore[no-untyped-def]
    """Objects under data/, a folder marker, and neighbours that a prefix or mask must leave out."""
    objects = {
        f"s3://{bucket}/data/part-{i:02d}.bin": f"object {i}".encode() * (i + 1) for i in range(OBJECTS)
    }
    for url, body in objects.items():
        boto_s3.put_object(Bucket=bucket, Key=url.split("/", 3)[3], Body=body)
    boto_s3.put_object(Bucket=bucket, Key="data/folder/", Body=b"")
    boto_s3.put_object(Bucket=bucket, Key="data/notes.txt", Body=b"not data")
    boto_s3.put_object(Bucket=bucket, Key="elsewhere/part-99.bin", Body=b"elsewhere")
    return objects


def list_requests(server: MotoServer, bucket: str) -> int:
    return sum(
        1
        for request in server.logged_requests()
        if request.startswith(f"GET /{bucket}") and "list-type=2" in request
    )


def read_all(pipe: IterDataPipe) -> Counter:
    """Counter of (url, sha256) over what DataLoader workers read."""
    loader = DataLoader(
        pipe.map(digest_object),
        batch_size=None,
        num_workers=WORKERS,
        multiprocessing_context="fork",
        timeout=60,
    )
    return Counter((url, digest) for url, digest, _pid, _worker in loader)


def test_same_answer_as_the_lister(listed_bucket: dict[str, bytes], bucket: str) -> None:
    prefixes = [f"s3://{bucket}/data/", f"s3://{bucket}/elsewhere/"]
    expected = list(IterableWrapper(prefixes).list_files_by_s3(masks="*.bin"))
    assert torchdata_s3.list_files_once(prefixes, "*.bin", page_size=PAGE_SIZE) == expected
    assert len(expected) == OBJECTS + 1  # the marker and notes.txt left out, elsewhere/ included
    assert torchdata_s3.list_files_once(f"s3://{bucket}/data/p") == sorted(listed_bucket)


def test_workers_fed_a_list_make_no_listing_requests(
    listed_bucket: dict[str, bytes], bucket: str, moto_server: MotoServer
) -> None:
    prefix = f"s3://{bucket}/data/"
    expected = Counter((url, hashlib.sha256(body).hexdigest()) for url, body in listed_bucket.items())
    pages = -(-(OBJECTS + 2) // PAGE_SIZE)  # + the folder marker and notes.txt

    # One page at a time, so that a listing costs exactly `pages` requests (in parallel, splits add some).
    one_stream = S3Config.resolve(max_list_requests=1)
    before = list_requests(moto_server, bucket)
    classic = (
        IterableWrapper([prefix])
        .list_files_by_s3(masks="*.bin", page_size=PAGE_SIZE, config=one_stream)
        .sharding_filter()
    )
    assert read_all(classic.load_files_by_s3()) == expected
    every_worker_lists = list_requests(moto_server, bucket) - before
    assert every_worker_lists == WORKERS * pages

    before = list_requests(moto_server, bucket)
    urls = torchdata_s3.list_files_once(prefix, "*.bin", page_size=PAGE_SIZE, config=one_stream)
    once = IterableWrapper(urls, deepcopy=False).sharding_filter().load_files_by_s3()
    assert read_all(once) == expected
    assert list_requests(moto_server, bucket) - before == pages  # this process's listing, none in workers


def test_listing_failure_is_raised_here(s3_endpoint: str) -> None:
    with pytest.raises(torchdata_s3.S3FileNotFoundError, match="bucket-that-does-not-exist"):
        torchdata_s3.list_files_once("s3://bucket-that-does-not-exist/")
