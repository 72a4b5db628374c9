"""The loader's prefetch window: objects requested ahead of the reader, bounded by count and by bytes."""

from __future__ import annotations

from collections import deque
from typing import Optional

from . import _core

__all__ = ["PrefetchWindow", "read_ahead_budget"]

# Bytes in flight needed to keep a link busy, in multiples of (rate x latency). A part is one request: it
# costs a round trip before its first byte, then its transfer. S3 serves one connection at about 90 MB/s,
# so an 8 MiB part takes three to five 20-30 ms round trips to transfer after its first byte arrives: to
# sustain a rate, four to six round trips' worth must be in flight. Measured on the s3like profile (30 ms):
# six gave 782 MB/s, four 681.
ROUND_TRIPS_IN_FLIGHT = 6
# Parts an object of unknown size costs before its headers arrive; the floor lets this many such objects
# (typically small ones, which give most of it back) be requested at once.
FLOOR_PARTS = 16


def read_ahead_budget(latency_s: Optional[float], rate_bytes_per_s: float, part: int, ceiling: int) -> int:
    """Bytes to request ahead of the reader: the endpoint's bandwidth-delay product at the target rate.

    Read ahead costs memory that must be touched once per process (page faults, on the threads that
    receive), so a near endpoint, where the next bytes are a fraction of a millisecond away, gets the floor,
    and a far one (real S3: tens of milliseconds) up to ``ceiling``. Unknown latency gets the floor.
    """
    floor = min(ceiling, FLOOR_PARTS * part)
    if latency_s is None:
        return floor
    wanted = ROUND_TRIPS_IN_FLIGHT * latency_s * rate_bytes_per_s
    return int(min(ceiling, max(floor, wanted)))


class _Ahead:
    """One object requested ahead: its stream and the bytes it may buffer (what it costs the budget)."""

    __slots__ = ("cost", "sized", "stream", "url")

    def __init__(self, url: str, stream: _core.ObjectStream, cost: int, sized: bool) -> None:
        self.url = url
        self.stream = stream
        self.cost = cost
        self.sized = sized  # its window already reflects its size


class PrefetchWindow:
    """Streams opened ahead of the reader, in input order, within ``max_objects`` and a byte budget.

    An object may buffer up to ``reading_window`` of itself ahead (what it gets once it is read), so
    parallel ranged GETs of later objects overlap the reading of earlier ones. Its cost is what it may buffer,
    rounded up to whole parts (the CRT fetches whole parts). An object of unknown size starts with one part
    and grows once its response headers tell its size, if the byte budget allows.

    The byte budget is :func:`read_ahead_budget` of the lowest response latency seen so far, never more than
    ``max_bytes``. It is first measured when the budget is first full: the window then waits for the oldest
    object's first request to be answered, which its reader would wait for anyway.
    """

    def __init__(self, max_objects: int, max_bytes: int, part: int, reading_window: int, rate: float) -> None:
        self.max_objects = max_objects
        self.max_bytes = max_bytes
        self.part = part
        self.reading_window = reading_window
        self.rate = rate  # bytes/s the budget should sustain
        self._ahead: deque[_Ahead] = deque()
        self._bytes = 0
        self.latency: Optional[float] = None  # lowest first-byte latency seen, in seconds
        self._measured = False  # waited once for the first latency
        self.budget = read_ahead_budget(None, rate, part, max_bytes)

    def window_of(self, size: Optional[int]) -> int:
        """The read window an object ahead gets: one part while its size is unknown, else as much of itself
        as it will get once it is read."""
        if size is None:
            return self.part
        return max(1, min(size, self.reading_window))

    def cost_of(self, size: Optional[int]) -> int:
        window = self.window_of(size)
        if size is None:
            return window
        return max(1, min(size, -(-window // self.part) * self.part))

    def has_room_for(self, cost: int) -> bool:
        if not self._ahead:
            return True  # one object is always allowed, whatever its size
        if len(self._ahead) > self.max_objects:
            return False
        if self._bytes + cost > self.budget:
            if not self._measured:
                self._measure_latency()
            self._settle_sizes()  # small objects whose headers arrived give back most of their part
        return self._bytes + cost <= self.budget

    def add(self, url: str, stream: _core.ObjectStream, size: Optional[int], cost: int) -> None:
        self._ahead.append(_Ahead(url, stream, cost, sized=size is not None))
        self._bytes += cost

    def pop(self) -> tuple[str, _core.ObjectStream]:
        """The next object in input order, its window widened for reading."""
        self._settle_sizes()
        ahead = self._ahead.popleft()
        self._bytes -= ahead.cost
        # Only streams not yet handed out are asked: a reader may have closed its own, or be reading it on
        # another thread. Telemetry lags the data, so the object behind is often the one that has answered.
        self._observe_latency(ahead.stream.first_byte_latency)
        if self._ahead:
            self._observe_latency(self._ahead[0].stream.first_byte_latency)
        ahead.stream.widen_window(self.reading_window)
        return ahead.url, ahead.stream

    def __bool__(self) -> bool:
        return bool(self._ahead)

    def close(self) -> None:
        """Cancels every download nobody will read."""
        while self._ahead:
            self._ahead.popleft().stream.close()

    def _measure_latency(self) -> None:
        # Once. A failure here is the reader's to see, in input order: this just learns nothing.
        self._measured = True
        self._observe_latency(self._ahead[0].stream.wait_for_first_byte_latency())

    def _observe_latency(self, latency: Optional[float]) -> None:
        if latency is None or (self.latency is not None and latency >= self.latency):
            return
        self.latency = latency
        self.budget = read_ahead_budget(latency, self.rate, self.part, self.max_bytes)

    def _settle_sizes(self) -> None:
        # Never waits: only objects whose headers already arrived are considered, in input order.
        for ahead in self._ahead:
            if ahead.sized:
                continue
            size = ahead.stream.size_if_known
            if size is None:
                continue
            cost = self.cost_of(size)
            grows = cost > ahead.cost
            if grows and self._bytes - ahead.cost + cost > self.budget:
                return  # it grows once the budget allows; later objects do not overtake it
            self._bytes += cost - ahead.cost  # a small object gives back what it will never buffer
            ahead.cost = cost
            ahead.sized = True
            if grows:
                ahead.stream.widen_window(self.window_of(size))
