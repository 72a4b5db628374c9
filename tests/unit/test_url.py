import pytest

from torchdata_s3 import InvalidS3UrlError, S3Url, parse_s3_url


@pytest.mark.parametrize(
    ("url", "bucket", "key"),
    [
        ("s3://bucket", "bucket", ""),
        ("s3://bucket/", "bucket", ""),
        ("s3://bucket/folder", "bucket", "folder"),
        ("s3://bucket/folder/", "bucket", "folder/"),
        ("s3://bucket/a/b/c.txt", "bucket", "a/b/c.txt"),
        ("s3://bucket/with space+plus%25&<>.bin", "bucket", "with space+plus%25&<>.bin"),
        ("s3://bucket/ünïcødé/日本", "bucket", "ünïcødé/日本"),
        ("S3://Bucket_1.x/k", "Bucket_1.x", "k"),
        ("s3://bucket//double", "bucket", "/double"),
    ],
)
def test_parses_bucket_and_raw_key(url: str, bucket: str, key: str) -> None:
    assert parse_s3_url(url) == S3Url(bucket, key)


@pytest.mark.parametrize(
    ("url", "is_prefix"),
    [
        ("s3://b/", True),
        ("s3://b", True),
        ("s3://b/dir/", True),
        ("s3://b/dir", False),
        ("s3://b/f.txt", False),
    ],
)
def test_is_prefix(url: str, is_prefix: bool) -> None:
    assert parse_s3_url(url).is_prefix is is_prefix


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "empty"),
        ("bucket/key", "no scheme"),
        ("http://bucket/key", "scheme 'http'"),
        ("gs://bucket/key", "scheme 'gs'"),
        ("s3://", "names no bucket"),
        ("s3:///key", "names no bucket"),
        ("s3://bad bucket/key", "not a valid bucket name"),
        ("s3://-bucket/key", "not a valid bucket name"),
        ("s3://bucket\n/key", "not a valid bucket name"),  # `$` matches before a final newline
        ("s3://bucket/caf\udce9", "not UTF-8"),  # os.fsdecode(b"caf\xe9"): no S3 key can hold it
        (None, "got NoneType"),
        (b"s3://bucket/key", "got bytes"),
    ],
)
def test_rejects_malformed_urls_naming_them(url: object, message: str) -> None:
    with pytest.raises(InvalidS3UrlError, match=message) as caught:
        parse_s3_url(url)
    assert isinstance(caught.value, ValueError)
    if isinstance(url, str) and url:
        assert repr(url) in str(caught.value)


def test_str_round_trips() -> None:
    assert str(parse_s3_url("s3://b/x y")) == "s3://b/x y"
