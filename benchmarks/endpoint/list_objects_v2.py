"""S3 ListObjectsV2 over a :class:`KeyIndex`: query parameters in, one page of results out as XML.

Continuation tokens are opaque to clients. Ours is the URL-safe base64 of a *resume marker*: the listing
continues at the first key >= the marker. After a key ``k`` the marker is ``k + "\\0"`` (the smallest
string after ``k``); after a common prefix it is the smallest string after every key under that prefix.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Callable, Optional
from urllib.parse import quote
from xml.sax.saxutils import escape

from benchmarks.endpoint.key_index import KeyIndex, ObjectInfo, s3_timestamp

S3_XML_NAMESPACE = "http://s3.amazonaws.com/doc/2006-03-01/"

MAX_KEYS_LIMIT = 1000
"""S3 returns at most 1000 entries per page, whatever ``max-keys`` asks for; it is also the default."""

_XML_QUOTES = {'"': "&quot;"}


class InvalidListRequest(ValueError):
    """A query S3 would reject with 400 InvalidArgument; the message says which parameter."""


@dataclass(frozen=True)
class ListRequest:
    """The ListObjectsV2 parameters we honour (``fetch-owner`` and others are accepted and ignored)."""

    prefix: str = ""
    delimiter: str = ""
    max_keys: int = MAX_KEYS_LIMIT
    continuation_token: Optional[str] = None
    start_after: str = ""
    url_encoded: bool = False

    def __post_init__(self) -> None:
        if self.continuation_token is not None:
            _decode_token(self.continuation_token)  # reject a bad token now, as a bad request

    @classmethod
    def from_query(cls, query: dict[str, list[str]]) -> ListRequest:
        """Build from ``urllib.parse.parse_qs(..., keep_blank_values=True)`` output."""

        def first(name: str) -> Optional[str]:
            values = query.get(name)
            return values[0] if values else None

        max_keys_text = first("max-keys")
        max_keys = MAX_KEYS_LIMIT
        if max_keys_text is not None:
            try:
                max_keys = int(max_keys_text)
            except ValueError:
                raise InvalidListRequest(f"max-keys must be an integer, got {max_keys_text!r}") from None
            if max_keys < 0:
                raise InvalidListRequest(f"max-keys must not be negative, got {max_keys}")
        encoding_type = first("encoding-type")
        if encoding_type not in (None, "url"):
            raise InvalidListRequest(f"Invalid Encoding Method specified in Request: {encoding_type!r}")
        return cls(
            prefix=first("prefix") or "",
            delimiter=first("delimiter") or "",
            max_keys=min(max_keys, MAX_KEYS_LIMIT),
            continuation_token=first("continuation-token"),
            start_after=first("start-after") or "",
            url_encoded=encoding_type == "url",
        )


@dataclass
class ListPage:
    """One page of a listing: objects and common prefixes in S3 order, and where the next page starts."""

    objects: list[ObjectInfo] = field(default_factory=list)
    common_prefixes: list[str] = field(default_factory=list)
    next_continuation_token: Optional[str] = None

    @property
    def key_count(self) -> int:
        return len(self.objects) + len(self.common_prefixes)


def list_page(index: KeyIndex, request: ListRequest) -> ListPage:
    """The page ``request`` asks for. Costs O(log n) per common prefix plus O(1) per listed key."""
    page = ListPage()
    position = index.first_at_or_after(_start_marker(request))
    resume_marker = ""
    while position < len(index) and page.key_count < request.max_keys:
        key = index.keys[position]
        if not key.startswith(request.prefix):
            break  # keys are sorted, so no later key has the prefix either
        common_prefix = _common_prefix(key, request.prefix, request.delimiter)
        if common_prefix is None:
            page.objects.append(index.object_at(position))
            resume_marker = key + "\0"
            position += 1
        else:
            page.common_prefixes.append(common_prefix)
            resume_marker = _after_all_under(common_prefix)
            position = index.first_at_or_after(resume_marker)
    more_remain = position < len(index) and index.keys[position].startswith(request.prefix)
    if more_remain and page.key_count > 0:
        page.next_continuation_token = _encode_token(resume_marker)
    return page


def render_list_page(bucket: str, request: ListRequest, page: ListPage) -> bytes:
    """The ``ListBucketResult`` document for ``page``; text XML-escaped, and URL-encoded if asked."""

    def text(value: str) -> str:
        return escape(quote(value, safe="/") if request.url_encoded else value, _XML_QUOTES)

    parts = render_head(bucket, request, page.key_count, page.next_continuation_token, text)
    parts.extend(render_entries(page, text))
    parts.append("</ListBucketResult>")
    return "".join(parts).encode("utf-8", "surrogateescape")


def render_head(
    bucket: str, request: ListRequest, key_count: int, token: Optional[str], text: Callable[[str], str]
) -> list[str]:
    """A ``ListBucketResult`` document up to its entries: the request echoed, the count, the next token."""
    parts = [
        '<?xml version="1.0" encoding="UTF-8"?>\n',
        f'<ListBucketResult xmlns="{S3_XML_NAMESPACE}">',
        f"<Name>{escape(bucket)}</Name>",
        f"<Prefix>{text(request.prefix)}</Prefix>",
    ]
    if request.delimiter:
        parts.append(f"<Delimiter>{text(request.delimiter)}</Delimiter>")
    if request.start_after:
        parts.append(f"<StartAfter>{text(request.start_after)}</StartAfter>")
    if request.continuation_token is not None:
        parts.append(f"<ContinuationToken>{escape(request.continuation_token)}</ContinuationToken>")
    if request.url_encoded:
        parts.append("<EncodingType>url</EncodingType>")
    parts.append(f"<MaxKeys>{request.max_keys}</MaxKeys>")
    parts.append(f"<KeyCount>{key_count}</KeyCount>")
    parts.append(f"<IsTruncated>{'true' if token else 'false'}</IsTruncated>")
    if token:
        parts.append(f"<NextContinuationToken>{token}</NextContinuationToken>")
    return parts


def render_entries(page: ListPage, text: Callable[[str], str]) -> list[str]:
    """The ``<Contents>`` and ``<CommonPrefixes>`` elements of a page (the same in ListObjects V1 and V2)."""
    parts = [
        f"<Contents><Key>{text(info.key)}</Key>"
        f"<LastModified>{s3_timestamp(info.mtime_s)}</LastModified>"
        f"<ETag>{escape(info.etag, _XML_QUOTES)}</ETag>"
        f"<Size>{info.size}</Size>"
        "<StorageClass>STANDARD</StorageClass></Contents>"
        for info in page.objects
    ]
    parts += [
        f"<CommonPrefixes><Prefix>{text(prefix)}</Prefix></CommonPrefixes>" for prefix in page.common_prefixes
    ]
    return parts


def _start_marker(request: ListRequest) -> str:
    """Where the listing starts: the token if given (it supersedes start-after, as in S3), else the later
    of the prefix and whatever follows start-after."""
    if request.continuation_token is not None:
        return _decode_token(request.continuation_token)
    after_start_after = request.start_after + "\0" if request.start_after else ""
    return max(request.prefix, after_start_after)


def _common_prefix(key: str, prefix: str, delimiter: str) -> Optional[str]:
    """The common prefix ``key`` rolls up into, or None when it is listed as itself."""
    if not delimiter:
        return None
    end = key.find(delimiter, len(prefix))
    return None if end < 0 else key[: end + len(delimiter)]


def _after_all_under(prefix: str) -> str:
    """The smallest string greater than every string that starts with ``prefix``."""
    while prefix and prefix[-1] == "\U0010ffff":
        prefix = prefix[:-1]  # nothing follows the largest code point; carry into the character before
    if not prefix:
        return "\U0010ffff" * 2  # past every real key
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def _encode_token(marker: str) -> str:
    return base64.urlsafe_b64encode(marker.encode("utf-8", "surrogatepass")).decode("ascii")


def _decode_token(token: str) -> str:
    try:
        marker = base64.b64decode(token.encode("ascii"), altchars=b"-_", validate=True)
        return marker.decode("utf-8", "surrogatepass")
    except (binascii.Error, UnicodeError, ValueError):
        raise InvalidListRequest("The continuation token provided is incorrect") from None
