"""The benchmark harness's local S3 endpoint: nginx for objects, the listing sidecar, the two profiles."""

from __future__ import annotations

import http.client
import os
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from pathlib import Path
from typing import Optional
from urllib.parse import quote, urlencode, urlsplit

import pytest
from botocore.exceptions import ClientError

from benchmarks.endpoint.nginx import LocalEndpoint, ensure_nginx_installed
from benchmarks.endpoint.verify import check_profile
from benchmarks.endpoint.verify_writes import PROBE_ATTEMPTS
from tests.benchmarks.endpoint_client import boto3_client

pytestmark = pytest.mark.integration

BUCKET = "data"
EMPTY_BUCKET = "empty"
SMALL_KEY = "small.bin"
SMALL_BODY = bytes(range(256)) * 40
BIG_KEY = "big.bin"
BIG_BYTES = 24 * 1024 * 1024
MANY_PREFIX = "many/"
MANY_KEYS = [f"{MANY_PREFIX}{number:05d}.txt" for number in range(2500)]
TREE_KEYS = ["tree/a/1.txt", "tree/a/2.txt", "tree/b/3.txt", "tree/c.txt", "tree/d/e/4.txt"]
ODD_PREFIX = "odd names/"
ODD_KEYS = [
    f"{ODD_PREFIX}with space.txt",
    f"{ODD_PREFIX}plus+sign.txt",
    f"{ODD_PREFIX}amp&and<angle>'quote\".txt",
    f"{ODD_PREFIX}ünïcødé ファイル.txt",
    f"{ODD_PREFIX}100%.txt",
    f"{ODD_PREFIX}Zebra~tilde.txt",
]
S3LIKE_LATENCY_MS = 30.0
S3LIKE_BANDWIDTH_MBPS = 90.0
XML_NAMESPACE = {"s3": "http://s3.amazonaws.com/doc/2006-03-01/"}


def body_of(key: str) -> bytes:
    return f"body of {key}".encode()


def all_keys() -> list[str]:
    return [SMALL_KEY, BIG_KEY, *MANY_KEYS, *TREE_KEYS, *ODD_KEYS]


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("endpoint-data")
    bucket_dir = root / BUCKET
    for key in [*MANY_KEYS, *TREE_KEYS, *ODD_KEYS]:
        (bucket_dir / key).parent.mkdir(parents=True, exist_ok=True)
        (bucket_dir / key).write_bytes(body_of(key))
    (bucket_dir / SMALL_KEY).write_bytes(SMALL_BODY)
    (bucket_dir / BIG_KEY).write_bytes(os.urandom(BIG_BYTES))
    (root / EMPTY_BUCKET).mkdir()
    return root


@pytest.fixture(scope="module")
def fast(data_root: Path) -> Iterator[LocalEndpoint]:
    ensure_nginx_installed()
    with LocalEndpoint(data_root, profile="fast") as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def s3like(data_root: Path) -> Iterator[LocalEndpoint]:
    ensure_nginx_installed()
    endpoint = LocalEndpoint(
        data_root, profile="s3like", latency_ms=S3LIKE_LATENCY_MS, bandwidth_mbps=S3LIKE_BANDWIDTH_MBPS
    )
    with endpoint:
        yield endpoint


@pytest.fixture(params=["fast", "s3like"])
def endpoint(request: pytest.FixtureRequest) -> LocalEndpoint:
    """Each behaviour check runs against both profiles: shaping must not change what is served."""
    return request.getfixturevalue(request.param)


class Response:
    def __init__(self, status: int, headers: http.client.HTTPMessage, body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    def xml(self) -> ElementTree.Element:
        return ElementTree.fromstring(self.body)


def call(
    endpoint: LocalEndpoint, method: str, path: str, headers: Optional[dict[str, str]] = None
) -> Response:
    url = urlsplit(endpoint.endpoint_url)
    connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=30)
    try:
        connection.request(method, path, headers=headers or {})
        response = connection.getresponse()
        return Response(response.status, response.headers, response.read())
    finally:
        connection.close()


def object_path(key: str, bucket: str = BUCKET, safe: str = "/") -> str:
    return f"/{bucket}/{quote(key, safe=safe)}"


def list_path(bucket: str = BUCKET, trailing_slash: bool = False, **parameters: object) -> str:
    query = {"list-type": 2, **{name.replace("_", "-"): value for name, value in parameters.items()}}
    return f"/{bucket}{'/' if trailing_slash else ''}?{urlencode(query, quote_via=quote)}"


def texts(element: ElementTree.Element, path: str) -> list[str]:
    return [found.text or "" for found in element.findall(path, XML_NAMESPACE)]


def text(element: ElementTree.Element, path: str) -> Optional[str]:
    found = element.find(path, XML_NAMESPACE)
    return None if found is None else (found.text or "")


def list_everything(endpoint: LocalEndpoint, **parameters: object) -> list[ElementTree.Element]:
    """Every page of a listing, following continuation tokens."""
    pages = []
    token: Optional[str] = None
    while True:
        extra = {"continuation_token": token} if token is not None else {}
        response = call(endpoint, "GET", list_path(**parameters, **extra))
        assert response.status == 200, response.body
        page = response.xml()
        pages.append(page)
        if text(page, "s3:IsTruncated") == "false":
            assert text(page, "s3:NextContinuationToken") is None
            return pages
        token = text(page, "s3:NextContinuationToken")
        assert token


def nginx_etag_of(path: Path) -> str:
    status = path.stat()
    return f'"{int(status.st_mtime):x}-{status.st_size:x}"'


# Objects --------------------------------------------------------------------------------------------------


def test_get_returns_the_whole_object_with_nginx_etag(endpoint: LocalEndpoint, data_root: Path) -> None:
    response = call(endpoint, "GET", object_path(SMALL_KEY))
    assert response.status == 200
    assert response.body == SMALL_BODY
    assert response.headers["Content-Length"] == str(len(SMALL_BODY))
    assert response.headers["ETag"] == nginx_etag_of(data_root / BUCKET / SMALL_KEY)


@pytest.mark.parametrize(
    ("range_header", "first", "last"),
    [
        ("bytes=10-99", 10, 99),
        ("bytes=10000-", 10000, 10239),
        ("bytes=-5", 10235, 10239),
        ("bytes=0-0", 0, 0),
    ],
)
def test_ranged_get_returns_exactly_the_range(
    endpoint: LocalEndpoint, range_header: str, first: int, last: int
) -> None:
    response = call(endpoint, "GET", object_path(SMALL_KEY), {"Range": range_header})
    assert response.status == 206
    assert response.body == SMALL_BODY[first : last + 1]
    assert response.headers["Content-Range"] == f"bytes {first}-{last}/{len(SMALL_BODY)}"


def test_ranged_get_of_a_large_object(endpoint: LocalEndpoint, data_root: Path) -> None:
    start, end = 8 * 1024 * 1024 - 3, 8 * 1024 * 1024 + 4096
    response = call(endpoint, "GET", object_path(BIG_KEY), {"Range": f"bytes={start}-{end}"})
    assert response.status == 206
    with open(data_root / BUCKET / BIG_KEY, "rb") as stored:
        stored.seek(start)
        assert response.body == stored.read(end - start + 1)
    assert response.headers["Content-Range"] == f"bytes {start}-{end}/{BIG_BYTES}"


def test_head_has_the_headers_and_no_body(endpoint: LocalEndpoint, data_root: Path) -> None:
    response = call(endpoint, "HEAD", object_path(SMALL_KEY))
    assert response.status == 200
    assert response.body == b""
    assert response.headers["Content-Length"] == str(len(SMALL_BODY))
    assert response.headers["ETag"] == nginx_etag_of(data_root / BUCKET / SMALL_KEY)


def test_if_match_is_honoured(endpoint: LocalEndpoint) -> None:
    etag = call(endpoint, "HEAD", object_path(SMALL_KEY)).headers["ETag"]
    matching = call(endpoint, "GET", object_path(SMALL_KEY), {"If-Match": etag, "Range": "bytes=0-3"})
    assert (matching.status, matching.body) == (206, SMALL_BODY[:4])
    assert call(endpoint, "GET", object_path(SMALL_KEY), {"If-Match": '"stale-1"'}).status == 412


@pytest.mark.parametrize("key", ["no/such/key.bin", "tree/a", "tree/a/", "missing"])
def test_missing_key_is_no_such_key(endpoint: LocalEndpoint, key: str) -> None:
    response = call(endpoint, "GET", object_path(key))
    assert response.status == 404
    assert response.headers["Content-Type"] == "application/xml"
    error = response.xml()
    assert error.tag == "Error"
    assert error.findtext("Code") == "NoSuchKey"
    assert error.findtext("Message") == "The specified key does not exist."
    assert call(endpoint, "HEAD", object_path(key)).status == 404


@pytest.mark.parametrize("key", ODD_KEYS)
def test_keys_with_special_characters_are_served(endpoint: LocalEndpoint, key: str) -> None:
    response = call(endpoint, "GET", object_path(key))
    assert (response.status, response.body) == (200, body_of(key))


def test_literal_plus_in_a_path_is_a_plus(endpoint: LocalEndpoint) -> None:
    """In a URL path '+' is not a space; sent unencoded it must still name the key with the '+'."""
    path = object_path(f"{ODD_PREFIX}plus+sign.txt", safe="/+")
    assert "+" in path
    response = call(endpoint, "GET", path)
    assert (response.status, response.body) == (200, body_of(f"{ODD_PREFIX}plus+sign.txt"))


# Listing --------------------------------------------------------------------------------------------------


def test_listing_pages_through_2500_keys(endpoint: LocalEndpoint) -> None:
    pages = list_everything(endpoint, prefix=MANY_PREFIX)
    assert [text(page, "s3:KeyCount") for page in pages] == ["1000", "1000", "500"]
    assert [text(page, "s3:MaxKeys") for page in pages] == ["1000"] * 3
    assert [key for page in pages for key in texts(page, "s3:Contents/s3:Key")] == MANY_KEYS


def test_max_keys_sets_the_page_size_up_to_1000(fast: LocalEndpoint) -> None:
    pages = list_everything(fast, prefix=MANY_PREFIX, max_keys=700)
    assert [text(page, "s3:KeyCount") for page in pages] == ["700", "700", "700", "400"]
    assert [key for page in pages for key in texts(page, "s3:Contents/s3:Key")] == MANY_KEYS
    capped = call(fast, "GET", list_path(prefix=MANY_PREFIX, max_keys=5000)).xml()
    assert (text(capped, "s3:MaxKeys"), text(capped, "s3:KeyCount")) == ("1000", "1000")


def test_listing_order_is_utf8_byte_order_over_the_whole_bucket(fast: LocalEndpoint) -> None:
    pages = list_everything(fast, max_keys=999)
    listed = [key for page in pages for key in texts(page, "s3:Contents/s3:Key")]
    assert listed == sorted(all_keys(), key=lambda key: key.encode("utf-8"))


def test_listing_reports_the_etag_and_size_a_get_returns(endpoint: LocalEndpoint) -> None:
    contents = [
        entry for page in list_everything(endpoint) for entry in page.findall("s3:Contents", XML_NAMESPACE)
    ]
    checked = [entry for entry in contents if text(entry, "s3:Key") in (SMALL_KEY, BIG_KEY, *TREE_KEYS)]
    assert len(checked) == 2 + len(TREE_KEYS)
    for entry in checked:
        head = call(endpoint, "HEAD", object_path(text(entry, "s3:Key") or ""))
        assert text(entry, "s3:ETag") == head.headers["ETag"]
        assert text(entry, "s3:Size") == head.headers["Content-Length"]
        assert text(entry, "s3:StorageClass") == "STANDARD"
        assert (text(entry, "s3:LastModified") or "").endswith(".000Z")


@pytest.mark.parametrize("trailing_slash", [False, True])
def test_prefix_and_delimiter_roll_up_common_prefixes(fast: LocalEndpoint, trailing_slash: bool) -> None:
    path = list_path(prefix="tree/", delimiter="/", trailing_slash=trailing_slash)
    page = call(fast, "GET", path).xml()
    assert texts(page, "s3:Contents/s3:Key") == ["tree/c.txt"]
    assert texts(page, "s3:CommonPrefixes/s3:Prefix") == ["tree/a/", "tree/b/", "tree/d/"]
    assert (text(page, "s3:KeyCount"), text(page, "s3:Delimiter")) == ("4", "/")


def test_common_prefixes_page_like_keys(fast: LocalEndpoint) -> None:
    pages = list_everything(fast, prefix="tree/", delimiter="/", max_keys=1)
    entries = [
        texts(page, "s3:Contents/s3:Key") + texts(page, "s3:CommonPrefixes/s3:Prefix") for page in pages
    ]
    assert entries == [["tree/a/"], ["tree/b/"], ["tree/c.txt"], ["tree/d/"]]


def test_delimiter_at_the_top_level(fast: LocalEndpoint) -> None:
    page = call(fast, "GET", list_path(delimiter="/")).xml()
    assert texts(page, "s3:Contents/s3:Key") == [BIG_KEY, SMALL_KEY]
    assert texts(page, "s3:CommonPrefixes/s3:Prefix") == [MANY_PREFIX, ODD_PREFIX, "tree/"]


def test_start_after(fast: LocalEndpoint) -> None:
    page = call(fast, "GET", list_path(prefix="tree/", start_after="tree/a/2.txt")).xml()
    assert texts(page, "s3:Contents/s3:Key") == ["tree/b/3.txt", "tree/c.txt", "tree/d/e/4.txt"]
    assert text(page, "s3:StartAfter") == "tree/a/2.txt"


def test_special_characters_are_escaped_in_listings(endpoint: LocalEndpoint) -> None:
    page = call(endpoint, "GET", list_path(prefix=ODD_PREFIX)).xml()
    assert texts(page, "s3:Contents/s3:Key") == sorted(ODD_KEYS, key=lambda key: key.encode("utf-8"))


def test_url_encoding_type_encodes_keys(fast: LocalEndpoint) -> None:
    page = call(fast, "GET", list_path(prefix=ODD_PREFIX, encoding_type="url")).xml()
    assert text(page, "s3:EncodingType") == "url"
    assert quote(f"{ODD_PREFIX}plus+sign.txt", safe="/") in texts(page, "s3:Contents/s3:Key")


def test_empty_bucket_and_empty_prefix(fast: LocalEndpoint) -> None:
    for path in (list_path(bucket=EMPTY_BUCKET), list_path(prefix="nothing-here/")):
        page = call(fast, "GET", path).xml()
        assert (text(page, "s3:KeyCount"), text(page, "s3:IsTruncated")) == ("0", "false")
        assert texts(page, "s3:Contents/s3:Key") == []


def test_unknown_bucket_is_no_such_bucket(endpoint: LocalEndpoint) -> None:
    response = call(endpoint, "GET", list_path(bucket="no-such-bucket"))
    assert response.status == 404
    assert response.xml().findtext("Code") == "NoSuchBucket"
    assert call(endpoint, "HEAD", "/no-such-bucket").status == 404
    assert call(endpoint, "HEAD", f"/{BUCKET}").status == 200
    assert call(endpoint, "HEAD", f"/{EMPTY_BUCKET}/").status == 200


@pytest.mark.parametrize(
    "parameters", [{"max_keys": "many"}, {"max_keys": -1}, {"continuation_token": "!!not-base64!!"}]
)
def test_bad_listing_parameters_are_invalid_argument(fast: LocalEndpoint, parameters: dict) -> None:
    response = call(fast, "GET", list_path(**parameters))
    assert response.status == 400
    assert response.xml().findtext("Code") == "InvalidArgument"


# boto3, end to end -----------------------------------------------------------------------------------------


def test_boto3_lists_and_gets(endpoint: LocalEndpoint) -> None:
    s3 = boto3_client(endpoint)
    s3.head_bucket(Bucket=BUCKET)
    paginator = s3.get_paginator("list_objects_v2")
    pages = list(paginator.paginate(Bucket=BUCKET, Prefix=MANY_PREFIX, PaginationConfig={"PageSize": 1000}))
    assert [page["KeyCount"] for page in pages] == [1000, 1000, 500]
    assert [entry["Key"] for page in pages for entry in page["Contents"]] == MANY_KEYS

    tree = s3.list_objects_v2(Bucket=BUCKET, Prefix="tree/", Delimiter="/")
    assert [entry["Key"] for entry in tree["Contents"]] == ["tree/c.txt"]
    assert [entry["Prefix"] for entry in tree["CommonPrefixes"]] == ["tree/a/", "tree/b/", "tree/d/"]

    whole = s3.get_object(Bucket=BUCKET, Key=SMALL_KEY)
    assert whole["Body"].read() == SMALL_BODY
    ranged = s3.get_object(Bucket=BUCKET, Key=SMALL_KEY, Range="bytes=100-199")
    assert ranged["Body"].read() == SMALL_BODY[100:200]
    assert ranged["ContentRange"] == f"bytes 100-199/{len(SMALL_BODY)}"
    listing = s3.list_objects_v2(Bucket=BUCKET)["Contents"]
    listed_etag = next(entry["ETag"] for entry in listing if entry["Key"] == BIG_KEY)
    assert listed_etag == s3.head_object(Bucket=BUCKET, Key=BIG_KEY)["ETag"]


def test_boto3_handles_special_keys_and_missing_ones(endpoint: LocalEndpoint) -> None:
    s3 = boto3_client(endpoint)
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=ODD_PREFIX)  # boto3 asks for url encoding-type
    assert sorted(entry["Key"] for entry in listed["Contents"]) == sorted(ODD_KEYS)
    for key in ODD_KEYS:
        assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == body_of(key)
    with pytest.raises(ClientError) as raised:
        s3.get_object(Bucket=BUCKET, Key="no/such/key")
    assert raised.value.response["Error"]["Code"] == "NoSuchKey"
    with pytest.raises(ClientError) as raised:
        s3.list_objects_v2(Bucket="no-such-bucket")
    assert raised.value.response["Error"]["Code"] == "NoSuchBucket"


# Profiles ---------------------------------------------------------------------------------------------------


def test_s3like_delivers_its_latency_and_bandwidth(s3like: LocalEndpoint) -> None:
    measured = check_profile(
        s3like.endpoint_url, BUCKET, BIG_KEY, "s3like", S3LIKE_LATENCY_MS, S3LIKE_BANDWIDTH_MBPS
    )
    assert measured["object_bytes"] == BIG_BYTES
    assert measured["bandwidth_mbps"] == max(measured["bandwidth_samples_mbps"])


def test_a_slow_bandwidth_probe_is_repeated_before_the_profile_is_refused(s3like: LocalEndpoint) -> None:
    # A busy machine only slows the probe down, so a GET under the lower bound is measured again; an
    # endpoint that stays under it (here: checked against twice its real pace) is refused after the last try.
    with pytest.raises(RuntimeError, match=rf"fastest of {PROBE_ATTEMPTS} GETs"):
        check_profile(
            s3like.endpoint_url, BUCKET, BIG_KEY, "s3like", S3LIKE_LATENCY_MS, 2 * S3LIKE_BANDWIDTH_MBPS
        )


def test_s3like_delays_listings_too(s3like: LocalEndpoint) -> None:
    url = urlsplit(s3like.endpoint_url)
    connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=30)
    try:
        connection.request("HEAD", f"/{BUCKET}")  # open the connection outside the timing
        connection.getresponse().read()
        started = time.perf_counter()
        connection.request("GET", list_path(prefix="tree/"))
        response = connection.getresponse()
        elapsed_ms = (time.perf_counter() - started) * 1000
        assert response.status == 200
        response.read()
    finally:
        connection.close()
    assert elapsed_ms >= 0.8 * S3LIKE_LATENCY_MS


def test_fast_is_not_shaped(fast: LocalEndpoint) -> None:
    measured = check_profile(fast.endpoint_url, BUCKET, BIG_KEY, "fast")
    assert measured["ttfb_ms"] < S3LIKE_LATENCY_MS / 2


def test_list_objects_v1_pages_with_markers(fast: LocalEndpoint) -> None:
    # The original torchdata S3FileLister speaks ListObjects V1 (marker-based).
    s3 = boto3_client(fast)
    v1 = [
        o["Key"]
        for page in s3.get_paginator("list_objects").paginate(Bucket=BUCKET)
        for o in page["Contents"]
    ]
    v2 = [
        o["Key"]
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
        for o in page["Contents"]
    ]
    in_s3_order = sorted(all_keys(), key=lambda key: key.encode())
    assert v1 == v2 == in_s3_order
    first = s3.list_objects(Bucket=BUCKET, MaxKeys=7)
    assert first["IsTruncated"] and first["NextMarker"] == first["Contents"][-1]["Key"]
    rest = s3.list_objects(Bucket=BUCKET, MaxKeys=7, Marker=first["NextMarker"])
    assert rest["Contents"][0]["Key"] == in_s3_order[7]
