"""The loader's prefetch window: objects requested ahead of the reader, bounded by count and by bytes."""

from __future__ import annotations

from collections import deque
from typing import Optional

from . import _core

__all__ = ["PrefetchWindow"]


class _Ahead:
    """One object requested ahead: its stream and the bytes it may buffer (what it costs the budget)."""

    __slots__ = ("cost", "sized", "stream", "url")

    def __init__(self, url: str, stream: _core.ObjectStream, cost: int, sized: bool) -> None:
        self.url = url
        self.stream = stream
        self.cost = cost
        self.sized = sized  # its window already reflects its size


class PrefetchWindow:
    """Streams opened ahead of the reader, in input order, within ``max_objects`` and ``max_bytes``.

    An object may buffer up to ``reading_window`` of itself ahead (what it gets once it is read), so
    parallel ranged GETs of later objects overlap the reading of earlier ones. Its cost is what it may buffer,
    rounded up to whole parts (the CRT fetches whole parts). An object of unknown size starts with one part
    and grows once its response headers tell its size, if the byte budget allows.
    """

    def __init__(self, max_objects: int, max_bytes: int, part: int, reading_window: int) -> None:
        self.max_objects = max_objects
        self.max_bytes = max_bytes
        self.part = part
        self.reading_window = reading_window
        self._ahead: deque[_Ahead] = deque()
        self._bytes = 0

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
        if self._bytes + cost > self.max_bytes:
            self._settle_sizes()  # small objects whose headers arrived give back most of their part
        return self._bytes + cost <= self.max_bytes

    def add(self, url: str, stream: _core.ObjectStream, size: Optional[int], cost: int) -> None:
        self._ahead.append(_Ahead(url, stream, cost, sized=size is not None))
        self._bytes += cost

    def pop(self) -> tuple[str, _core.ObjectStream]:
        """The next object in input order, its window widened for reading."""
        self._settle_sizes()
        ahead = self._ahead.popleft()
        self._bytes -= ahead.cost
        ahead.stream.widen_window(self.reading_window)
        return ahead.url, ahead.stream

    def __bool__(self) -> bool:
        return bool(self._ahead)

    def close(self) -> None:
        """Cancels every download nobody will read."""
        while self._ahead:
            self._ahead.popleft().stream.close()

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
            if grows and self._bytes - ahead.cost + cost > self.max_bytes:
                return  # it grows once the budget allows; later objects do not overtake it
            self._bytes += cost - ahead.cost  # a small object gives back what it will never buffer
            ahead.cost = cost
            ahead.sized = True
            if grows:
                ahead.stream.widen_window(self.window_of(size))
