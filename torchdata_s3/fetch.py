"""Objects fetched in order, ahead of the reader: the engine every loading door uses.

:func:`fetch_in_order` takes the objects to read, in the order they will be read, and yields each one's
seekable :class:`~torchdata_s3.reader.S3ObjectStream` once its response has arrived, while up to
``prefetch`` later objects download within a byte budget (:class:`~torchdata_s3.prefetch.PrefetchWindow`)
and the local cache (``cache_dir``) serves what it holds. The DataPipe loader, the datasets and the
``torchdata.nodes`` source differ only in where their objects come from and what they do with a failed one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator, Iterator
from typing import Any, Callable, NamedTuple, Optional, TypeVar, Union

from . import _core
from .cache.object_cache import object_cache
from .client import S3Client
from .errors import S3Error
from .landed import LandedObjectStream
from .prefetch import PrefetchWindow
from .reader import ObjectReader, S3ObjectStream
from .url import S3Url

__all__ = [
    "DEFAULT_MAX_INFLIGHT_BYTES",
    "DEFAULT_PREFETCH",
    "Fetched",
    "FetchedStream",
    "ObjectTarget",
    "fetch_in_order",
]

MiB = 1024 * 1024
# Objects requested ahead of the one being read, and the bytes they may buffer (PrefetchWindow). For small
# objects far away the count is what binds: a reader gets at most prefetch / latency objects per second
# (see docs/datasets.md). 128 in flight served 2,070 110-kB objects/s 30 ms away against 1,460 with 64;
# on a near endpoint they made no difference.
DEFAULT_PREFETCH = 128
DEFAULT_MAX_INFLIGHT_BYTES = 512 * MiB


class ObjectTarget(NamedTuple):
    """One object to read. ``size`` and ``etag`` are known when it came from a listing."""

    url: str
    location: S3Url
    size: Optional[int] = None
    etag: str = ""


# What a loading door hands its reader: see Fetched.
FetchedStream = Union[S3ObjectStream, LandedObjectStream]


class Fetched(NamedTuple):
    """An object as its reader gets it: a stream whose response has arrived (all of it, for an object of at
    most ``small_object_bytes``: landed.py), or the S3Error its request failed with (the stream then is None
    and nothing is left open)."""

    target: ObjectTarget
    stream: Optional[FetchedStream]
    error: Optional[S3Error]


def _landed(native: _core.ObjectStream, location: S3Url, most_bytes: int) -> Optional[LandedObjectStream]:
    """The object whole once it has arrived, if it has at most ``most_bytes`` (at most a part: one GET
    received into one ``bytes``), its GET then closed. None, the GET untouched, for a larger one. Raises the
    GET's failure (the caller closes it)."""
    _first, size = native.placement()  # waits for the response's headers
    if size > most_bytes:
        return None
    # An empty object's GET is never read (as ObjectReader never reads it): some servers (moto) fail its body
    # with a 416 after headers that said 0 bytes.
    data = native.read(-1) if size else b""  # the bytes it was received into, once the GET has ended cleanly
    landed = LandedObjectStream(data, location, etag=native.etag, bytes_fetched=native.received_bytes)
    native.close()
    return landed


T = TypeVar("T")


def _answered(request: Any, wait: Callable[[], T]) -> tuple[Optional[T], Optional[S3Error]]:
    """``wait()``'s result, or the S3Error it raised with ``request`` closed (closed as well, and raised, on
    any other exception)."""
    try:
        return wait(), None
    except S3Error as error:
        request.close()
        return None, error
    except BaseException:
        request.close()
        raise


def check_prefetch(prefetch: int, max_inflight_bytes: int) -> None:
    """Refuses prefetch settings that cannot work, naming them."""
    if not isinstance(prefetch, int) or isinstance(prefetch, bool) or prefetch < 0:
        raise ValueError(f"prefetch must be an integer >= 0, got {prefetch!r}")
    if (
        not isinstance(max_inflight_bytes, int)
        or isinstance(max_inflight_bytes, bool)
        or max_inflight_bytes < 1
    ):
        raise ValueError(f"max_inflight_bytes must be a positive integer, got {max_inflight_bytes!r}")


def fetch_in_order(
    client: S3Client,
    targets: Iterator[ObjectTarget],
    *,
    prefetch: int = DEFAULT_PREFETCH,
    max_inflight_bytes: int = DEFAULT_MAX_INFLIGHT_BYTES,
    multi_part_download: bool = True,
) -> Generator[Fetched, None, None]:
    """Yields a :class:`Fetched` per target, in order, requesting up to ``prefetch`` objects ahead.

    An object of known size (from a listing) may buffer up to ``read_window_bytes`` of itself ahead, one of
    unknown size one part, all within ``max_inflight_bytes`` (see :class:`PrefetchWindow`). An exception
    raised by ``targets`` itself (a bad URL, a failed listing) is raised after every object before it was
    yielded, so errors arrive in input order. Closing the generator cancels every download not yet yielded.
    """
    config = client.config
    part = config.part_size_bytes
    # Within a part, so that a small object's one GET brings all of it: landed.py.
    landed_most_bytes = min(config.small_object_bytes, part)
    reading_window = config.read_window_bytes if multi_part_download else part
    rate = config.throughput_target_gbps * 1e9 / 8
    try:
        node_budget = client.node_budget
    except S3Error:
        node_budget = None  # no native client: the first GET raises the same failure, naming its object
    window = PrefetchWindow(prefetch, max_inflight_bytes, part, reading_window, rate, node_budget=node_budget)
    # Every object planned, in input order; those fetched without the cache have a stream in `window`.
    opened: deque[ObjectTarget] = deque()
    plans: deque[Any] = deque()  # each target's cache plan (None: no cache)
    cache = object_cache(config)
    failure: Optional[Exception] = None

    def next_ready(until: Optional[ObjectTarget] = None) -> Fetched:
        # `until`: the target just planned, not yet in the window, which must not be yielded yet.
        assert opened[0] is not until
        target = opened.popleft()
        plan = plans.popleft()
        native = None
        if plan is None or plan.needs_get:
            _url, native = window.pop()
        if plan is None and native is not None and landed_most_bytes:
            landed, error = _answered(native, lambda: _landed(native, target.location, landed_most_bytes))
            if error is not None:
                return Fetched(target, None, error)
            if landed is not None:
                if target.size is None:
                    window.remember_size(landed.size)  # for the guesses of the objects requested next
                return Fetched(target, landed, None)
        reading: dict[str, Any] = {"size": target.size, "window_bytes": window.reading_window}
        reader = (
            ObjectReader(client, target.location, stream=native, **reading)
            if plan is None
            else plan.raw(client, target.location, native, **reading)
        )
        # Waits for the response headers and raises the request's failure. Not `size`: a listing gives the
        # size, and the object would then be yielded before its answer, its failure coming from the reader's
        # first read instead of here, at its turn.
        _etag, error = _answered(reader, lambda: reader.etag)
        if error is not None:
            return Fetched(target, None, error)
        if target.size is None:
            window.remember_size(reader.size_if_known)  # for the guesses of the objects requested next
        # Made once the size is known: its buffer is then no larger than the object (1 MiB otherwise).
        return Fetched(target, S3ObjectStream(reader), None)

    try:
        while True:
            try:
                target = next(targets)
            except StopIteration:
                break
            except Exception as error:
                # Found while looking ahead: the objects before it are yielded first.
                failure = error
                break
            plan = (
                cache.plan(client, target.location, target.size, target.etag) if cache is not None else None
            )
            opened.append(target)
            plans.append(plan)
            if plan is not None and not plan.needs_get:
                # Served from the cache: no GET, but no further ahead than `prefetch` objects.
                while len(opened) > max(1, prefetch):
                    yield next_ready()
                continue
            while not window.has_room_for(target.size):
                yield next_ready(until=target)
            guessed_length = window.guessed_length_of(target.size)
            stream = client.open_native(
                target.location,
                window_bytes=window.window_of(target.size),
                size_hint=target.size,
                landing_capacity=window.landing_capacity_of(target.size),
                guessed_length=guessed_length,
            )
            window.add(target.url, stream, target.size, guessed_length)
        while opened:
            yield next_ready()
        if failure is not None:
            raise failure
    finally:
        window.close()
        for plan in plans:
            if plan is not None:
                plan.release()
        if cache is not None:
            cache.flush_counts()
