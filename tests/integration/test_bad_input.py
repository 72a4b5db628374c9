"""The bad-input catalogue: malformed URLs, names the server does not know, odd keys, empty and large objects,
each through both DataPipes, against a real moto server. docs/errors.md states the rules tested here."""

from __future__ import annotations

import hashlib
import http.server
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from torch.utils.data.datapipes.iter import IterableWrapper

from tests.loopback_http import loopback_http_server
from torchdata_s3 import (
    InvalidS3UrlError,
    S3Client,
    S3Config,
    S3Error,
    S3FileLister,
    S3FileLoader,
    S3FileNotFoundError,
    S3IntegrityError,
    S3NetworkError,
    S3PermissionError,
)

pytestmark = pytest.mark.integration

MiB = 1024 * 1024
PIPES = ["lister", "loader"]


def listed(*urls: object, **options: object) -> list[str]:
    return list(S3FileLister(IterableWrapper(list(urls)), **options))


def loaded(*urls: object, **options: object) -> list[tuple[str, bytes]]:
    return [(url, stream.read()) for url, stream in S3FileLoader(IterableWrapper(list(urls)), **options)]


def run(pipe: str, *urls: object, **options: object) -> list:
    return listed(*urls, **options) if pipe == "lister" else loaded(*urls, **options)


# --- malformed URLs: InvalidS3UrlError before any request ---------------------------------------------

MALFORMED = [
    ("", "empty S3 URL"),
    ("bucket/key", "has no scheme"),
    ("s3:/bucket/key", "has no scheme"),
    ("/local/path/file.txt", "has no scheme"),
    ("http://bucket/key", "has scheme 'http'"),
    ("s3a://bucket/key", "has scheme 's3a'"),
    ("s3://", "names no bucket"),
    ("s3:///key", "names no bucket"),
    ("s3://bad bucket/key", "not a valid bucket name"),
    ("s3://-bucket/key", "not a valid bucket name"),
    ("s3://bucket!/key", "not a valid bucket name"),
    ("s3://" + "b" * 256 + "/key", "not a valid bucket name"),
    ("s3://bucket?versionId=1", "not a valid bucket name"),
    ("s3://bucket#part", "not a valid bucket name"),
    ("s3://user@bucket/key", "not a valid bucket name"),
    (" s3://bucket/key", "starts with whitespace"),
    ("\ts3://bucket/key", "starts with whitespace"),
    ("s3://bucket/key\n", "ends with a line break"),
    ("s3://bucket/key\r\n", "ends with a line break"),
    ("s3://bucket/key\r", "ends with a line break"),
    (None, "got NoneType"),
    (b"s3://bucket/key", "got bytes"),
    (42, "got int"),
    (Path("bucket/key"), "got PosixPath"),
]


@pytest.mark.parametrize("pipe", PIPES)
@pytest.mark.parametrize(("url", "message"), MALFORMED, ids=[repr(url) for url, _ in MALFORMED])
def test_malformed_urls(pipe: str, url: object, message: str) -> None:
    # Refused before any request: the endpoint (a closed loopback port) is never contacted.
    with pytest.raises(InvalidS3UrlError, match=message) as caught:
        run(pipe, url, endpoint_url="http://127.0.0.1:9")
    assert isinstance(caught.value, ValueError)
    assert repr(url) in str(caught.value) or url == ""  # the URL, shown with its invisible characters


@pytest.mark.parametrize("pipe", PIPES)
def test_bad_input_fails_when_reached_after_the_good_ones(boto_s3, bucket: str, pipe: str) -> None:  # type: ignore[no-untyped-def]
    boto_s3.put_object(Bucket=bucket, Key="good", Body=b"good")
    iterator = iter(S3FileLister(IterableWrapper([f"s3://{bucket}/good", "gs://elsewhere/x"])))
    if pipe == "loader":
        iterator = iter(S3FileLoader(IterableWrapper([f"s3://{bucket}/good", "gs://elsewhere/x"])))
    first = next(iterator)
    assert (first if pipe == "lister" else (first[0], first[1].read())) == (
        f"s3://{bucket}/good" if pipe == "lister" else (f"s3://{bucket}/good", b"good")
    )
    with pytest.raises(InvalidS3UrlError, match="'gs://elsewhere/x' has scheme 'gs'"):
        next(iterator)


# --- names the server judges --------------------------------------------------------------------------------


@pytest.mark.parametrize("pipe", PIPES)
@pytest.mark.parametrize(
    "name",
    [
        "absent-bucket",
        "ab",  # shorter than AWS allows, but another S3 store may have it: the server answers
        "Upper_Case.Bucket",
        "bucket..dots",
    ],
)
def test_buckets_the_server_does_not_have(s3_endpoint: str, pipe: str, name: str) -> None:
    url = f"s3://{name}/key" if pipe == "loader" else f"s3://{name}/"
    with pytest.raises(
        S3FileNotFoundError, match=rf"{url.replace('.', '[.]')} failed: NoSuchBucket \(HTTP 404\)"
    ) as caught:
        run(pipe, url)
    error = caught.value
    assert (error.url, error.s3_error_code, error.http_status, error.errno) == (url, "NoSuchBucket", 404, 2)
    assert isinstance(error, FileNotFoundError)
    assert "Check the bucket name and the key" in str(error)


def test_missing_key_is_file_not_found_for_the_loader(bucket: str) -> None:
    url = f"s3://{bucket}/absent"
    with pytest.raises(
        S3FileNotFoundError, match=rf"GetObject {url} failed: NoSuchKey \(HTTP 404\)"
    ) as caught:
        loaded(url)
    assert (caught.value.url, caught.value.s3_error_code, caught.value.http_status) == (url, "NoSuchKey", 404)


def test_prefixes_that_match_nothing_yield_nothing(bucket: str) -> None:
    # Every lister input and every loader input ending in '/' is a prefix: an empty prefix is not an error,
    # as in the original torchdata S3 DataPipes.
    assert listed(f"s3://{bucket}/absent") == []
    assert listed(f"s3://{bucket}/absent/") == []
    assert loaded(f"s3://{bucket}/absent/") == []
    assert loaded(f"s3://{bucket}") == []


def test_missing_key_between_good_ones(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    boto_s3.put_object(Bucket=bucket, Key="a", Body=b"first")
    boto_s3.put_object(Bucket=bucket, Key="c", Body=b"third")
    pipe = S3FileLoader(IterableWrapper([f"s3://{bucket}/a", f"s3://{bucket}/b", f"s3://{bucket}/c"]))
    iterator = iter(pipe)
    assert next(iterator)[1].read() == b"first"
    # Raised when the object is yielded, as the original loader did: nothing needs to read it first.
    with pytest.raises(S3FileNotFoundError, match=f"s3://{bucket}/b failed: NoSuchKey"):
        next(iterator)
    with pytest.raises(StopIteration):  # a generator that raised is finished, as the original's was
        next(iterator)


# --- regions ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pipe", PIPES)
def test_region_mismatch_on_a_server_that_ignores_regions(boto_s3, pipe: str) -> None:  # type: ignore[no-untyped-def]
    # moto serves a bucket whatever region a request is signed for (real S3 refuses: see the next test).
    boto_s3.create_bucket(Bucket="in-ireland", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    boto_s3.put_object(Bucket="in-ireland", Key="k", Body=b"from eu-west-1")
    started = time.monotonic()
    for region in ("eu-west-1", "ap-southeast-2"):
        result = run(pipe, "s3://in-ireland/k", region=region)
        assert result == (
            ["s3://in-ireland/k"] if pipe == "lister" else [("s3://in-ireland/k", b"from eu-west-1")]
        )
    assert time.monotonic() - started < 10


# What real S3 answers when a bucket is addressed in the wrong region (moto never does): path-style requests
# get a 301 PermanentRedirect, requests signed for the wrong region a 400 AuthorizationHeaderMalformed.
REGION_REFUSALS = {
    "PermanentRedirect": (
        301,
        "The bucket you are attempting to access must be addressed using the specified endpoint. "
        "Please send all future requests to this endpoint.",
    ),
    "AuthorizationHeaderMalformed": (
        400,
        "The authorization header is malformed; the region 'us-east-1' is wrong; expecting 'eu-west-1'",
    ),
}


@pytest.fixture
def region_refusing_endpoint(request: pytest.FixtureRequest) -> Iterator[str]:
    """An endpoint on loopback that answers every request as S3 does for a bucket in another region."""
    code = request.param
    status, message = REGION_REFUSALS[code]
    body = (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
        "<Region>eu-west-1</Region><RequestId>R</RequestId><HostId>H</HostId></Error>"
    ).encode()

    class Refusing(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("x-amz-bucket-region", "eu-west-1")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    with loopback_http_server(Refusing) as url:
        yield url


@pytest.mark.parametrize("pipe", PIPES)
@pytest.mark.parametrize("region_refusing_endpoint", list(REGION_REFUSALS), indirect=True)
def test_wrong_region_refused_by_the_server(region_refusing_endpoint: str, pipe: str) -> None:
    url = "s3://in-ireland/k" if pipe == "loader" else "s3://in-ireland/"
    started = time.monotonic()
    with pytest.raises(S3Error) as caught:
        run(pipe, url, endpoint_url=region_refusing_endpoint, region="us-east-1")
    assert time.monotonic() - started < 10  # refused at once, not retried
    error = caught.value
    # Not a missing object nor a permission problem: the bare S3Error, with what to do.
    assert not isinstance(error, (S3FileNotFoundError, S3PermissionError, S3NetworkError, S3IntegrityError))
    assert error.url == url
    assert (error.s3_error_code, error.http_status) in [
        (code, status) for code, (status, _) in REGION_REFUSALS.items()
    ]
    assert f"{url} failed: {error.s3_error_code} (HTTP {error.http_status})" in str(error)
    assert "set region= (or AWS_REGION) to the bucket's region" in str(error)


# --- an endpoint whose success answers carry no header line ----------------------------------------------
# "HTTP/1.1 206 Partial Content" and a blank line: never S3, but a broken proxy or gateway can send it. The
# CRT crashed on it (an empty object's partNumber=1 GET: SIGSEGV) or reported status 0; fixed in the pinned
# sources (cmake/AwsCrtPatches.cmake). Every operation fails typed instead, naming its URL; HeadObject
# reports no size rather than 0.

EMPTY_OBJECT_416 = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>InvalidRange</Code>'
    b"<Message>The requested range is not satisfiable</Message><ActualObjectSize>0</ActualObjectSize></Error>"
)


@pytest.fixture
def headerless_endpoint() -> Iterator[str]:
    """Answers every request with a bare 206, except the first GET of key ``empty``: S3's 416 for an empty
    object, which makes the CRT ask again with ``partNumber=1``."""

    class Headerless(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path.endswith("/empty") and self.command == "GET":
                self.send_response(416)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(EMPTY_OBJECT_416)))
                self.end_headers()
                self.wfile.write(EMPTY_OBJECT_416)
                return
            self.wfile.write(b"HTTP/1.1 206 Partial Content\r\n\r\n")  # no header line at all
            self.close_connection = True  # the body, if any, would end with the connection

        do_GET = do_HEAD = do_PUT = do_POST = answer

        def log_message(self, *args: object) -> None:
            pass

    with loopback_http_server(Headerless) as url:
        yield url


def write_multipart(client: S3Client, url: str) -> None:
    with client.open(url, "wb") as writer:
        writer.write(b"x" * (2 * MiB))  # past the 1 MiB threshold: CreateMultipartUpload first


# What each operation is done to: an object URL and the call.
HEADERLESS_OPERATIONS = {
    "read": ("s3://bucket/key", lambda client, url: client.open(url).read()),
    "read an empty object": ("s3://bucket/empty", lambda client, url: client.open(url).read()),
    "read the tail": ("s3://bucket/key", lambda client, url: client.open(url).seek(-3, 2)),
    "head": ("s3://bucket/key", lambda client, url: client.head(url)),
    "multipart write": ("s3://bucket/key", write_multipart),
}


@pytest.mark.parametrize("operation", list(HEADERLESS_OPERATIONS))
def test_an_answer_without_headers_fails_typed(headerless_endpoint: str, operation: str) -> None:
    client = S3Client(
        S3Config.resolve(endpoint_url=headerless_endpoint, max_retries=0, multipart_threshold_bytes=MiB)
    )
    url, perform = HEADERLESS_OPERATIONS[operation]

    with pytest.raises(S3Error) as caught:
        perform(client, url)

    assert caught.value.url == url and url in str(caught.value), repr(caught.value)
    assert str(caught.value).endswith(". Check that endpoint_url points at an S3 API."), str(caught.value)


# --- object contents: empty, folder markers, large ----------------------------------------------------------


def test_zero_length_objects(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    boto_s3.put_object(Bucket=bucket, Key="empty.bin", Body=b"")
    boto_s3.put_object(Bucket=bucket, Key="folder/", Body=b"")  # a console "folder": not data
    boto_s3.put_object(Bucket=bucket, Key="folder/inside", Body=b"x")
    boto_s3.put_object(Bucket=bucket, Key="not-a-marker/", Body=b"data under a name ending in /")
    expected_urls = [f"s3://{bucket}/{key}" for key in ("empty.bin", "folder/inside", "not-a-marker/")]
    assert listed(f"s3://{bucket}/") == expected_urls
    [(url, stream)] = S3FileLoader(IterableWrapper([f"s3://{bucket}/empty.bin"]))
    assert url == f"s3://{bucket}/empty.bin"
    assert stream.read() == b"" and stream.read(10) == b"" and stream.readline() == b""
    assert loaded(f"s3://{bucket}/") == [
        (f"s3://{bucket}/empty.bin", b""),
        (f"s3://{bucket}/folder/inside", b"x"),
        (f"s3://{bucket}/not-a-marker/", b"data under a name ending in /"),
    ]
    # A loader input ending in '/' is a prefix: a non-empty object named so is loaded with what is under it.
    assert loaded(f"s3://{bucket}/not-a-marker/") == [
        (f"s3://{bucket}/not-a-marker/", b"data under a name ending in /")
    ]


def test_large_object_through_list_and_load_with_small_parts(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    size = 64 * MiB + 333  # 65 parts of 1 MiB, the last one short
    data = random.Random(64).randbytes(size)
    boto_s3.put_object(Bucket=bucket, Key="big/shard.bin", Body=data)
    expected = hashlib.sha256(data).hexdigest()
    del data
    pipe = IterableWrapper([f"s3://{bucket}/big/"]).list_files_by_s3().load_files_by_s3(part_size_bytes=MiB)
    [(url, stream)] = list(pipe)
    assert url == f"s3://{bucket}/big/shard.bin"
    digest, total = hashlib.sha256(), 0
    while chunk := stream.read(3 * MiB + 17):  # reads that straddle part boundaries
        digest.update(chunk)
        total += len(chunk)
    assert (total, digest.hexdigest()) == (size, expected)


# --- odd keys: kept exactly as written ----------------------------------------------------------------------

ODD_KEYS = [
    "with space.txt",
    "trailing space ",
    " leading space",
    "plus+sign",
    "percent%20stays%2Fliteral",
    "amp&lt<gt>",
    "hash#fragment",
    "question?versionId=not-a-query",
    "ünïcødé/日本語.txt",
    "emoji-🚀",
    "quote\"apos'",
    "semi;colon=equals,comma",
    "back\\slash",
    "brackets[0]{1}^|`~",
    "tab\tinside",
    "delete\x7finside",
    "dots/../not-up",
    "./here",
    "double//slash",
    "/leading-slash",
    "long-ascii/" + "k" * (1024 - len("long-ascii/")),  # S3's longest key: 1024 bytes of UTF-8
    "long-utf8/" + "é" * ((1024 - len("long-utf8/")) // 2),
]


@pytest.fixture
def odd_bucket(boto_s3, bucket: str) -> str:  # type: ignore[no-untyped-def]
    for key in ODD_KEYS:
        boto_s3.put_object(Bucket=bucket, Key=key, Body=f"body of {key!r}".encode())
    return bucket


def test_every_odd_key_through_list_and_load(odd_bucket: str) -> None:
    assert len(max(ODD_KEYS, key=len).encode()) == 1024
    urls = [f"s3://{odd_bucket}/{key}" for key in sorted(ODD_KEYS, key=lambda k: k.encode())]
    assert listed(f"s3://{odd_bucket}/") == urls  # S3 order: by UTF-8 bytes
    pipe = IterableWrapper([f"s3://{odd_bucket}/"]).list_files_by_s3().load_files_by_s3()
    assert [(url, stream.read()) for url, stream in pipe] == [
        (url, f"body of {url.split('/', 3)[3]!r}".encode()) for url in urls
    ]


@pytest.mark.parametrize("key", ODD_KEYS, ids=[repr(key)[:40] for key in ODD_KEYS])
def test_odd_key_by_its_url(boto_s3, bucket: str, key: str) -> None:  # type: ignore[no-untyped-def]
    boto_s3.put_object(Bucket=bucket, Key=key, Body=f"body of {key!r}".encode())
    url = f"s3://{bucket}/{key}"
    assert listed(url) == [url]
    assert loaded(url) == [(url, f"body of {key!r}".encode())]


@pytest.mark.parametrize("pipe", PIPES)
def test_key_longer_than_s3_allows_is_left_to_the_server(bucket: str, pipe: str) -> None:
    # Not checked locally (other S3 stores may allow more): moto answers 404; a 400 would be an S3Error.
    url = f"s3://{bucket}/" + "k" * 1025
    if pipe == "lister":
        assert listed(url) == []
    else:
        with pytest.raises(S3Error) as caught:
            loaded(url)
        assert caught.value.url == url and caught.value.http_status in (400, 404)


def test_keys_that_look_like_prefixes(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    for key in ("data", "data.txt", "data/1", "data/2/x"):
        boto_s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
    every = [f"s3://{bucket}/{key}" for key in ("data", "data.txt", "data/1", "data/2/x")]
    # The lister treats every input as a prefix; the loader only those ending in '/' (and bare buckets).
    assert listed(f"s3://{bucket}/data") == every
    assert loaded(f"s3://{bucket}/data") == [(f"s3://{bucket}/data", b"data")]
    assert listed(f"s3://{bucket}/data/") == every[2:]
    assert loaded(f"s3://{bucket}/data/") == [(url, url.split("/", 3)[3].encode()) for url in every[2:]]
    assert [url for url, _ in loaded(f"s3://{bucket}")] == every


def test_key_ending_in_a_line_break(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    # Such a URL is refused (it is nearly always a line ending left on a URL read from a file), but the
    # object is still listed, and loaded when the loader expands a prefix.
    boto_s3.put_object(Bucket=bucket, Key="lines/ends-in-cr\r", Body=b"cr")
    url = f"s3://{bucket}/lines/ends-in-cr\r"
    assert listed(f"s3://{bucket}/lines/") == [url]
    assert loaded(f"s3://{bucket}/lines/") == [(url, b"cr")]
    with pytest.raises(InvalidS3UrlError, match="ends with a line break"):
        loaded(url)
