"""Many byte ranges of many objects, fetched at once: what ``cat_ranges`` and ``cat`` are made of.

Ranges of one object that overlap or lie closer than a gap are merged into one span, so a Parquet reader's
column chunks cost one GET each rather than one per page. Spans are requested concurrently (each one a
native GET, its parts in parallel), within a bound on the bytes buffered, and read back in order with the GIL
released.
"""

from __future__ import annotations

from collections import deque
from typing import Optional, Union

from ..client import S3Client
from ..errors import S3Error
from ..fetch import DEFAULT_MAX_INFLIGHT_BYTES, DEFAULT_PREFETCH
from ..url import parse_s3_url

# As many GETs in flight, and as many bytes they may buffer ahead of the reader, as the loader requests ahead:
# a span waiting its turn buffers at most one part (a whole object) or itself (a range); the one being read
# may then run a read window ahead.
MAX_SPANS_IN_FLIGHT = DEFAULT_PREFETCH
MAX_BYTES_IN_FLIGHT = DEFAULT_MAX_INFLIGHT_BYTES
# HTTP 416: the range starts at or past the object's end; fsspec's answer for that is no bytes.
_RANGE_NOT_SATISFIABLE = 416

Span = tuple[str, int, Optional[int]]  # (bucket/key, start, end exclusive or None: to the end)


def merge_ranges(
    ranges: list[tuple[str, int, int]], max_gap: int
) -> tuple[list[Span], list[tuple[int, int]]]:
    """Spans covering every ``(path, start, end)`` range, merging ranges of one path less than ``max_gap``
    apart (or overlapping), in the order each path first appears; and for each range, the index of the span
    that holds it and its offset in that span."""
    by_path: dict[str, list[int]] = {}
    for index, (path, _start, _end) in enumerate(ranges):
        by_path.setdefault(path, []).append(index)
    spans: list[Span] = []
    placements = [(0, 0)] * len(ranges)
    for path, indices in by_path.items():
        indices.sort(key=lambda i: (ranges[i][1], ranges[i][2]))
        span_start, span_end = ranges[indices[0]][1], ranges[indices[0]][2]
        for i in indices:
            _path, start, end = ranges[i]
            if start - span_end >= max_gap:
                spans.append((path, span_start, span_end))
                span_start, span_end = start, end
            span_end = max(span_end, end)
            placements[i] = (len(spans), start - span_start)
        spans.append((path, span_start, span_end))
    return spans, placements


def fetch_spans(
    client: S3Client, spans: list[Span], *, return_exceptions: bool = False
) -> list[Union[bytes, BaseException]]:
    """The bytes of every span, in order. A failed span raises (after the GETs in flight are cancelled), or
    with ``return_exceptions`` takes its exception's place in the result."""
    results: list[Union[bytes, BaseException]] = [b""] * len(spans)
    part = client.config.part_size_bytes
    pending = deque(enumerate(spans))
    in_flight: deque = deque()  # (index, stream or None, bytes it may buffer)
    buffered = 0
    try:
        while pending or in_flight:
            while pending and len(in_flight) < MAX_SPANS_IN_FLIGHT:
                index, (path, start, end) = pending[0]
                budget = part if end is None else max(1, end - start)
                if in_flight and buffered + budget > MAX_BYTES_IN_FLIGHT:
                    break
                pending.popleft()
                in_flight.append((index, _start(client, path, start, end, budget), budget))
                buffered += budget
            index, stream, budget = in_flight.popleft()
            buffered -= budget
            results[index] = _finish(stream, client.config.read_window_bytes, return_exceptions)
    finally:
        for _index, stream, _budget in in_flight:
            if stream is not None:
                stream.close()
    return results


def _start(client: S3Client, path: str, start: int, end: Optional[int], window: int):  # type: ignore[no-untyped-def]
    if end is not None and end <= start:
        return None  # an empty range: no request
    location = parse_s3_url(f"s3://{path}")
    if end is None and start == 0:
        return client.open_native(location, window_bytes=window)
    if end is None:
        raise ValueError(f"an open-ended range must start at 0 (s3://{path} from {start})")
    return client.open_native(location, byte_range=(start, end - 1), window_bytes=window)


def _finish(stream, window: int, return_exceptions: bool) -> Union[bytes, BaseException]:  # type: ignore[no-untyped-def]
    if stream is None:
        return b""
    try:
        with stream:
            stream.widen_window(window)  # its turn: may now run as far ahead as a reader's stream
            return stream.read(-1)
    except S3Error as error:
        if error.http_status == _RANGE_NOT_SATISFIABLE:
            return b""
        if return_exceptions:
            return error
        raise
