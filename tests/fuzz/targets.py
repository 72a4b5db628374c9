"""Fuzz targets: each takes the raw bytes of one input and checks properties of the code under test.

A target returns normally when the code behaved as documented and raises AssertionError (or lets an
unexpected exception escape) when it did not. The same functions run under atheris (tests/fuzz/run.py) and
replay the committed corpus in every test run (tests/fuzz/test_corpus.py).

- ``s3_url``: bytes decoded as UTF-8 with surrogateescape (so undecodable bytes become lone surrogates, as
  ``os.fsdecode`` makes them) into a string handed to :func:`torchdata_s3.parse_s3_url`, then through what
  the loader and lister do with a parsed URL: ``str()``, ``is_prefix`` and the native key encoding.
- ``list_objects_v2``: bytes handed to the native ListObjectsV2 parser as a response body.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Callable

from torchdata_s3 import InvalidS3UrlError, S3Url, _core, parse_s3_url

__all__ = ["TARGETS", "check_list_objects_v2", "check_s3_url", "render_list_objects_v2"]

# An independent statement of what parse_s3_url accepts (README, url.py's docstring): scheme s3 in any
# case, a bucket of letters, digits, '.', '-', '_' starting with a letter or digit, at most 255 long,
# then optionally '/' and a key of any characters that UTF-8 can carry, except a final line break (a line
# ending left on a URL read from a file, refused on purpose).
_VALID_URL = re.compile(r"(?i:s3)://(?P<bucket>[A-Za-z0-9][A-Za-z0-9._-]{0,254})(?:/(?P<key>.*))?", re.DOTALL)
_UNRESERVED_OR_SLASH = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/")
_MALFORMED_LISTING = "malformed ListObjectsV2 response"
_UINT64_LIMIT = 2**64


def _utf8_encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_s3_url(data: bytes) -> None:
    url = data.decode("utf-8", errors="surrogateescape")
    expected = _VALID_URL.fullmatch(url)
    if expected is not None and (not _utf8_encodable(url) or url.endswith(("\n", "\r"))):
        expected = None  # S3 names are UTF-8: a lone surrogate can never reach a server
    try:
        location = parse_s3_url(url)
    except InvalidS3UrlError as error:
        assert expected is None, f"{url!r} is a valid URL but was rejected: {error}"
        if url:
            assert repr(url) in str(error), f"the error for {url!r} does not name it: {error}"
        return
    assert expected is not None, f"{url!r} is not a valid URL but parsed as {location!r}"
    assert type(location) is S3Url
    assert location.bucket == expected["bucket"], (url, location)
    assert location.key == (expected["key"] or ""), (url, location)
    # What the lister yields and the loader names its streams with re-parses to the same object.
    assert str(location) == f"s3://{location.bucket}/{location.key}"
    assert parse_s3_url(str(location)) == location
    assert location.is_prefix == (location.key == "" or location.key.endswith("/"))
    # The request path the native client builds for the key: only unreserved bytes and '/' stay as they
    # are, everything else is %XX, and decoding it gives back the key's bytes exactly.
    encoded = _core.encode_path(location.key)
    assert encoded.isascii(), encoded
    raw = encoded.encode("ascii")
    assert all(byte in _UNRESERVED_OR_SLASH or byte == ord("%") for byte in raw), encoded
    assert re.fullmatch(rb"(?:[^%]|%[0-9A-F]{2})*", raw), encoded
    assert urllib.parse.unquote_to_bytes(encoded) == location.key.encode("utf-8"), (location.key, encoded)


def _escape_text(text: str) -> str:
    # Escapes what XML text must not hold raw; control characters as numeric references, as S3 writes them.
    out = []
    for char in text:
        if char in "&<>\"'":
            out.append({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;"}[char])
        elif ord(char) < 0x20 or char == "\x7f":
            out.append(f"&#{ord(char)};")
        else:
            out.append(char)
    return "".join(out)


def render_list_objects_v2(
    objects: list[tuple[str, int, str]], prefixes: list[str], token: str | None
) -> bytes:
    """A ListObjectsV2 response body holding exactly this page (for the round-trip property)."""
    parts = ['<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult>']
    parts.append(f"<IsTruncated>{'true' if token is not None else 'false'}</IsTruncated>")
    if token is not None:
        parts.append(f"<NextContinuationToken>{_escape_text(token)}</NextContinuationToken>")
    for key, size, etag in objects:
        parts.append(
            f"<Contents><Key>{_escape_text(key)}</Key><Size>{size}</Size><ETag>{_escape_text(etag)}</ETag></Contents>"
        )
    for prefix in prefixes:
        parts.append(f"<CommonPrefixes><Prefix>{_escape_text(prefix)}</Prefix></CommonPrefixes>")
    parts.append("</ListBucketResult>")
    return "".join(parts).encode("utf-8")


def check_list_objects_v2(data: bytes) -> None:
    try:
        page = _core.parse_list_objects_v2(data)
    except ValueError as error:
        # The documented failure, and only that: no UnicodeDecodeError or other ValueError in disguise.
        assert type(error) is ValueError, f"{type(error).__name__} instead of ValueError: {error}"
        assert str(error).startswith(_MALFORMED_LISTING), str(error)
        return
    assert type(page) is tuple and len(page) == 3, page
    objects, prefixes, token = page
    assert type(objects) is list and type(prefixes) is list, page
    for entry in objects:
        assert type(entry) is tuple and len(entry) == 3, entry
        key, size, etag = entry
        assert type(key) is str and type(etag) is str, entry
        assert type(size) is int and 0 <= size < _UINT64_LIMIT, entry
    assert all(type(prefix) is str for prefix in prefixes), prefixes
    assert token is None or (type(token) is str and token != ""), token
    # Rendering the page back and parsing it again yields the same page: nothing lost or altered in
    # unescaping (keys with '&', '<', quotes, control characters, unicode all survive).
    again = _core.parse_list_objects_v2(render_list_objects_v2(objects, prefixes, token))
    assert again == (objects, prefixes, token), (page, again)


TARGETS: dict[str, Callable[[bytes], None]] = {
    "s3_url": check_s3_url,
    "list_objects_v2": check_list_objects_v2,
}
