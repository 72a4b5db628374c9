"""Parsing ``s3://bucket/key`` URLs."""

from __future__ import annotations

import re
from typing import NamedTuple

from .errors import InvalidS3UrlError

__all__ = ["S3Url", "parse_s3_url"]

# Loose on purpose: S3-compatible stores accept names AWS would not (upper case, underscores), and the
# server is the judge of what exists. What we reject can never be a bucket anywhere. Used with fullmatch:
# `$` would also match before a trailing newline and let "bucket\n" through.
_BUCKET = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")


class S3Url(NamedTuple):
    bucket: str
    key: str  # may be empty: the whole bucket

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    @property
    def is_prefix(self) -> bool:
        """True for a URL that names a folder or a whole bucket rather than one object."""
        return self.key == "" or self.key.endswith("/")


def parse_s3_url(url: object) -> S3Url:
    """Splits ``s3://bucket/key`` into bucket and key.

    The key is kept exactly as written (spaces, ``+``, ``%``, unicode): it is not URL-decoded, because S3
    keys are arbitrary strings and ``s3://`` URLs carry them raw.

    Raises:
        InvalidS3UrlError: the value is not a string, is empty, starts with whitespace, ends with a line
            break, has another scheme or no scheme, has no bucket (``s3://``, ``s3:///key``), or holds a
            lone surrogate (what ``os.fsdecode`` makes of bytes that are not UTF-8), which no S3 name can
            contain.
    """
    if not isinstance(url, str):
        raise InvalidS3UrlError(f"expected an s3://bucket/key string, got {type(url).__name__}: {url!r}")
    if url == "":
        raise InvalidS3UrlError("empty S3 URL: expected s3://bucket/key")
    if url[0].isspace():
        raise InvalidS3UrlError(f"{url!r} starts with whitespace: an S3 URL begins with s3://; strip it")
    if url.endswith(("\n", "\r")):
        # Almost always a line ending of a file of URLs; kept, it would ask for a key nobody has.
        raise InvalidS3UrlError(
            f"{url!r} ends with a line break: strip line endings from URLs read from files "
            "(line.rstrip('\\r\\n'))"
        )
    scheme, separator, rest = url.partition("://")
    if not separator:
        raise InvalidS3UrlError(f"{url!r} has no scheme: expected s3://bucket/key")
    if scheme.lower() != "s3":
        raise InvalidS3UrlError(f"{url!r} has scheme {scheme!r}: only s3:// URLs are supported")
    bucket, _, key = rest.partition("/")
    if bucket == "":
        raise InvalidS3UrlError(f"{url!r} names no bucket: expected s3://bucket/key")
    if not _BUCKET.fullmatch(bucket):
        raise InvalidS3UrlError(
            f"{url!r}: {bucket!r} is not a valid bucket name (letters, digits, '.', '-', '_'; at most 255)"
        )
    try:
        key.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidS3UrlError(
            f"{url!r}: the key holds {key[error.start]!r}, which is not UTF-8 text (S3 keys are UTF-8); "
            "decode file names with their real encoding before building the URL"
        ) from None
    return S3Url(bucket, key)
