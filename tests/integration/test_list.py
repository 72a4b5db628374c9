"""S3FileLister / list_files_by_s3 against a real S3-protocol server. Odd keys, missing buckets and malformed
input: test_bad_input.py."""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest
from torch.utils.data.datapipes.iter import IterableWrapper

from tests.loopback_http import loopback_http_server
from torchdata_s3 import InvalidS3UrlError, S3Client, S3Config, S3Error, S3FileLister

pytestmark = pytest.mark.integration

KEYS = ["a.txt", "data/1.bin", "data/2.bin", "data/sub/3.bin", "data2/4.txt", "zeta"]


@pytest.fixture
def listed_bucket(boto_s3, bucket: str) -> str:  # type: ignore[no-untyped-def]
    for key in KEYS:
        boto_s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
    boto_s3.put_object(Bucket=bucket, Key="data/emptyfolder/", Body=b"")  # a console "folder" marker
    return bucket


def listed(*urls: str, **kwargs: object) -> list[str]:
    return list(S3FileLister(IterableWrapper(list(urls)), **kwargs))


def urls(bucket: str, keys: list[str]) -> list[str]:
    return [f"s3://{bucket}/{key}" for key in keys]


@pytest.mark.parametrize("suffix", ["", "/"])
def test_bucket_lists_everything(listed_bucket: str, suffix: str) -> None:
    assert listed(f"s3://{listed_bucket}{suffix}") == urls(listed_bucket, KEYS)


def test_folder_with_slash_is_recursive(listed_bucket: str) -> None:
    assert listed(f"s3://{listed_bucket}/data/") == urls(
        listed_bucket, ["data/1.bin", "data/2.bin", "data/sub/3.bin"]
    )


def test_folder_without_slash_and_partial_names_are_prefixes(listed_bucket: str) -> None:
    expected = urls(listed_bucket, ["data/1.bin", "data/2.bin", "data/sub/3.bin", "data2/4.txt"])
    assert listed(f"s3://{listed_bucket}/data") == expected
    assert listed(f"s3://{listed_bucket}/da") == expected


def test_full_key(listed_bucket: str) -> None:
    assert listed(f"s3://{listed_bucket}/data/2.bin") == urls(listed_bucket, ["data/2.bin"])


def test_several_inputs_in_order(listed_bucket: str) -> None:
    assert listed(f"s3://{listed_bucket}/zeta", f"s3://{listed_bucket}/a") == urls(
        listed_bucket, ["zeta", "a.txt"]
    )


def test_masks(listed_bucket: str) -> None:
    assert listed(f"s3://{listed_bucket}/", masks="*.txt") == urls(listed_bucket, ["a.txt", "data2/4.txt"])
    assert listed(f"s3://{listed_bucket}/", masks=["*.txt", "*/sub/*"]) == urls(
        listed_bucket, ["a.txt", "data/sub/3.bin", "data2/4.txt"]
    )


def test_empty_result(listed_bucket: str) -> None:
    assert listed(f"s3://{listed_bucket}/nothing-here/") == []


def test_functional_form_and_length(listed_bucket: str) -> None:
    pipe = IterableWrapper([f"s3://{listed_bucket}/data/"]).list_files_by_s3(length=3)
    assert isinstance(pipe, S3FileLister)
    assert len(pipe) == 3
    with pytest.raises(TypeError, match="valid length"):
        len(IterableWrapper([f"s3://{listed_bucket}/"]).list_files_by_s3())


def test_more_than_one_page(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    keys = sorted(f"many/{i:05d}" for i in range(1100))
    for key in keys:
        boto_s3.put_object(Bucket=bucket, Key=key, Body=b"")
    assert listed(f"s3://{bucket}/many/") == urls(bucket, keys)  # two pages of the server's 1000
    assert listed(f"s3://{bucket}/many/", page_size=7) == urls(bucket, keys)


class _WebPage(BaseHTTPRequestHandler):
    """Answers every request 200 with an HTML page, as a captive portal or a misconfigured endpoint does."""

    def do_GET(self) -> None:
        body = b"<html><body>Sign in to continue</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        # http.server closes after every answer: say so, or the client may send its next request on the
        # closing connection (seen once in 7 runs: AWS_ERROR_HTTP_CONNECTION_CLOSED with max_retries=0).
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def web_page_endpoint() -> Iterator[str]:
    with loopback_http_server(_WebPage) as url:
        yield url


def test_a_listing_answered_with_a_web_page_is_an_s3_error_naming_the_url(web_page_endpoint: str) -> None:
    config = S3Config.resolve(endpoint_url=web_page_endpoint, anonymous=True, max_retries=0)
    with pytest.raises(
        S3Error, match=r"^ListObjectsV2 s3://bucket/data/ failed: .*not a ListObjectsV2 result"
    ) as caught:
        list(S3Client(config).list_objects("s3://bucket/data/"))
    # The input was fine; the answer was not. (Every S3Error is also a ValueError, as the original's were.)
    assert not isinstance(caught.value, InvalidS3UrlError)
    assert (caught.value.url, caught.value.operation, caught.value.http_status) == (
        "s3://bucket/data/",
        "ListObjectsV2",
        200,
    )
    assert str(caught.value).endswith("Check that endpoint_url points at an S3 API.")
    with pytest.raises(S3Error, match="not a ListObjectsV2 result"):
        listed("s3://bucket/data/", config=config)


def test_a_bucket_listing_answered_with_a_web_page_is_an_s3_error(web_page_endpoint: str) -> None:
    config = S3Config.resolve(endpoint_url=web_page_endpoint, anonymous=True, max_retries=0)
    with pytest.raises(S3Error, match=r"^ListBuckets s3:// failed: .*not a ListBuckets result") as caught:
        S3Client(config).list_buckets()
    assert (caught.value.operation, caught.value.http_status) == ("ListBuckets", 200)
    assert str(caught.value).endswith("Check that endpoint_url points at an S3 API.")
