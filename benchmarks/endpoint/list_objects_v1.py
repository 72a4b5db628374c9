"""S3 ListObjects (version 1, marker-based) on top of the V2 machinery; the original torchdata lister uses it.

A V1 ``marker`` means "start after this key", exactly what V2's ``start-after`` means, so a V1 request is
served as a V2 page and rendered with V1's element names. ``NextMarker`` is always sent on a truncated
page (S3 sends it only with a delimiter; clients that resume from the last key get the same answer).
"""

from __future__ import annotations

from typing import Optional
from urllib.parse import quote
from xml.sax.saxutils import escape

from benchmarks.endpoint.key_index import KeyIndex
from benchmarks.endpoint.list_objects_v2 import (
    _XML_QUOTES,
    MAX_KEYS_LIMIT,
    S3_XML_NAMESPACE,
    ListRequest,
    list_page,
    render_entries,
)


def v1_request(query: dict[str, list[str]]) -> tuple[ListRequest, str]:
    """The V2 request that serves a V1 query, and the V1 marker (for echoing back)."""

    def first(name: str) -> Optional[str]:
        values = query.get(name)
        return values[0] if values else None

    marker = first("marker") or ""
    allowed = ("prefix", "delimiter", "max-keys", "encoding-type")
    v2_query = {name: values for name, values in query.items() if name in allowed}
    if marker:
        v2_query["start-after"] = [marker]
    return ListRequest.from_query(v2_query), marker


def render_v1(bucket: str, index: KeyIndex, query: dict[str, list[str]]) -> bytes:
    request, marker = v1_request(query)

    def text(value: str) -> str:  # boto3 asks for encoding-type=url by default
        return escape(quote(value, safe="/") if request.url_encoded else value, _XML_QUOTES)

    page = list_page(index, request)
    truncated = page.next_continuation_token is not None
    parts = [
        '<?xml version="1.0" encoding="UTF-8"?>\n',
        f'<ListBucketResult xmlns="{S3_XML_NAMESPACE}">',
        f"<Name>{escape(bucket)}</Name>",
        f"<Prefix>{text(request.prefix)}</Prefix>",
        f"<Marker>{text(marker)}</Marker>",
        f"<MaxKeys>{request.max_keys or MAX_KEYS_LIMIT}</MaxKeys>",
    ]
    if request.delimiter:
        parts.append(f"<Delimiter>{text(request.delimiter)}</Delimiter>")
    if request.url_encoded:
        parts.append("<EncodingType>url</EncodingType>")
    parts.append(f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>")
    if truncated:
        last = max([info.key for info in page.objects] + page.common_prefixes)
        parts.append(f"<NextMarker>{text(last)}</NextMarker>")
    parts.extend(render_entries(page, text))
    parts.append("</ListBucketResult>")
    return "".join(parts).encode("utf-8", "surrogateescape")
