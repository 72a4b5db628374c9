"""ListObjectsV2 over generated key spaces (:mod:`benchmarks.endpoint.generated_keys`): one page as XML.

The semantics are those of the on-disk listing sidecar (:mod:`benchmarks.endpoint.list_objects_v2`, whose
request parsing, tokens and markers this reuses): keys strictly after ``start-after``; a continuation token
supersedes ``start-after``; ``delimiter`` rolls keys up into ``CommonPrefixes`` (each counted once, against
``max-keys``, at most 1,000); ``KeyCount``, ``IsTruncated``, ``NextContinuationToken``; text XML-escaped and,
with ``encoding-type=url``, URL-encoded. Only the rendering differs: every key has the same size, ETag and
LastModified, so a page is one string join over a template, about a millisecond per 1,000 keys.
"""

from __future__ import annotations

from typing import Optional
from urllib.parse import quote
from xml.sax.saxutils import escape

from benchmarks.endpoint.generated_keys import PLAIN_CHARACTERS, KeySpace
from benchmarks.endpoint.list_objects_v2 import (
    ListRequest,
    _after_all_under,
    _common_prefix,
    _encode_token,
    _start_marker,
    render_head,
)

OBJECT_SIZE = 110_000  # an ImageNet JPEG's typical size
ETAG = '"9b2cf535f27731c974343645a3985328"'
LAST_MODIFIED = "2026-01-01T00:00:00.000Z"
_XML_QUOTES = {'"': "&quot;"}
_URL_SAFE = frozenset(PLAIN_CHARACTERS)
_XML_PLAIN = frozenset("&<>\"'\r\n\t")


class GeneratedPage:
    """One page: keys, common prefixes, and the marker the next page starts from (None: the last page)."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.common_prefixes: list[str] = []
        self.resume_marker: Optional[str] = None

    @property
    def key_count(self) -> int:
        return len(self.keys) + len(self.common_prefixes)


def generated_page(space: KeySpace, request: ListRequest) -> GeneratedPage:
    """The page ``request`` asks for over ``space``: O(log n) keys computed per common prefix and per page,
    plus about one per listed key (computed in batches: a key at a time costs the endpoint twice the CPU)."""
    page = GeneratedPage()
    start = space.first_at_or_after(_start_marker(request))
    end = space.first_at_or_after(_after_all_under(request.prefix)) if request.prefix else len(space)
    if not request.delimiter:
        stop = min(end, start + request.max_keys)
        page.keys = space.keys(start, stop) if start < stop else []
        if stop < end and page.keys:
            page.resume_marker = page.keys[-1] + "\0"
        return page
    position = start
    marker = ""
    batch = 1  # keys computed at once: doubled while none rolls up, back to one after a common prefix
    after_prefix, delimiter = len(request.prefix), request.delimiter
    while position < end and page.key_count < request.max_keys:
        keys = space.keys(position, min(end, position + batch, position + request.max_keys - page.key_count))
        # The first key that rolls up into a common prefix; those before it are listed as themselves.
        rolled = next((i for i, key in enumerate(keys) if key.find(delimiter, after_prefix) >= 0), len(keys))
        if rolled:
            page.keys += keys[:rolled]
            marker = keys[rolled - 1] + "\0"
            position += rolled
        if rolled == len(keys):
            batch *= 2
            continue
        common_prefix = _common_prefix(keys[rolled], request.prefix, delimiter)
        assert common_prefix is not None
        page.common_prefixes.append(common_prefix)
        marker = _after_all_under(common_prefix)
        position = space.first_at_or_after(marker)
        batch = 1
    if position < end and page.key_count > 0:
        page.resume_marker = marker
    return page


def render_generated_page(
    bucket: str, request: ListRequest, page: GeneratedPage, plain: bool = False
) -> bytes:
    """The ``ListBucketResult`` document of ``page``; ``plain``: its keys need no escaping or encoding (the
    key space's ``plain``), which saves a scan of every key."""

    def text(value: str) -> str:
        if request.url_encoded and not _URL_SAFE.issuperset(value):
            value = quote(value, safe="/")
        return escape(value, _XML_QUOTES) if not _XML_PLAIN.isdisjoint(value) else value

    token = _encode_token(page.resume_marker) if page.resume_marker is not None else None
    parts = render_head(bucket, request, page.key_count, token, text)
    tail = (
        f"</Key><LastModified>{LAST_MODIFIED}</LastModified><ETag>{escape(ETAG, _XML_QUOTES)}</ETag>"
        f"<Size>{OBJECT_SIZE}</Size><StorageClass>STANDARD</StorageClass></Contents><Contents><Key>"
    )
    keys = page.keys if plain else [text(key) for key in page.keys]
    if keys:
        parts.append("<Contents><Key>" + tail.join(keys) + tail[: -len("<Contents><Key>")])
    parts += [
        f"<CommonPrefixes><Prefix>{text(prefix)}</Prefix></CommonPrefixes>" for prefix in page.common_prefixes
    ]
    parts.append("</ListBucketResult>")
    return "".join(parts).encode("utf-8", "surrogateescape")
