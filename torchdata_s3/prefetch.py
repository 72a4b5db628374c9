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
# The budget never falls below this many parts: enough for the object after the one being read to start
# its ranged GETs before it is reached. Objects of unknown size do not need more (see PrefetchWindow).
FLOOR_PARTS = 2
# Objects whose sizes became known, remembered to estimate what the next objects of unknown size will cost.
SIZES_REMEMBERED = 64
# _settle_sizes stops looking after this many objects in a row still without headers. On a CPU-bound loader
# some 20 objects ahead were unanswered at each pop, and asking each of them cost more of the loader's time
# per small object than anything else in Python.
UNANSWERED_BEFORE_STOP = 3


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
    """One object requested ahead: its stream and what it costs the budget.

    ``cost`` is the most it may buffer (its window, in whole parts), counted against ``max_bytes``;
    ``expected`` is what it is expected to buffer, counted against the latency-derived budget. They differ
    only while its size is unknown.
    """

    __slots__ = ("cost", "expected", "planned", "size", "sized", "stream", "url")

    def __init__(
        self,
        url: str,
        stream: _core.ObjectStream,
        size: Optional[int],
        cost: int,
        expected: int,
        planned: int,
    ) -> None:
        self.url = url
        self.stream = stream
        self.size = size  # None until its headers arrive
        self.cost = cost
        self.expected = expected
        # Results planned for it before its size came (its guessed length): held until it is read, whatever
        # its size turns out to be, so it never costs less.
        self.planned = planned
        self.sized = size is not None  # its window already reflects its size


class PrefetchWindow:
    """Streams opened ahead of the reader, in input order, within ``max_objects`` and two byte limits.

    An object may buffer up to ``reading_window`` of itself ahead (what it gets once it is read), so
    parallel ranged GETs of later objects overlap the reading of earlier ones. Its cost is what it may buffer,
    rounded up to whole parts (the CRT fetches whole parts). An object of unknown size starts with one part
    and grows once its response headers tell its size, in input order and in whole parts as the limits allow;
    while one is short of its window no new object is requested (depth before breadth: the reader needs the
    nearest objects first).

    Two limits apply:

    - ``max_bytes`` bounds the worst case, whatever the objects turn out to be: an object of unknown size
      counts as a whole part until its headers arrive.
    - The budget, :func:`read_ahead_budget` of the lowest response latency seen so far (never more than
      ``max_bytes``), bounds what the objects are expected to buffer: an object of unknown size counts as the
      largest of the last objects whose sizes became known (at most a part), or their mean cost if larger (a
      part until one is known). Many small objects can then be requested at once within a budget of a few
      parts, and a budget of large objects holds as many of them whole as it can (not one part of each).

    The budget is first measured when it first refuses an object: the window then waits for the oldest
    object's first request to be answered, which its reader would wait for anyway.

    With a node budget (``S3Config.node_memory_budget_bytes``), an object is requested ahead only while the
    node has its cost free; the streams then take their bytes from it themselves (node_budget.h).
    """

    def __init__(
        self,
        max_objects: int,
        max_bytes: int,
        part: int,
        reading_window: int,
        rate: float,
        node_budget: Optional[_core.NodeBudget] = None,
    ) -> None:
        self.max_objects = max_objects
        self.max_bytes = max_bytes
        self.part = part
        self.reading_window = reading_window
        self.rate = rate  # bytes/s the budget should sustain
        self.node_budget = node_budget
        self._ahead: deque[_Ahead] = deque()
        self._bytes = 0  # the sum of costs: at most max_bytes
        self._expected = 0  # the sum of expected costs: at most the budget
        self._recent_costs: deque[int] = deque(maxlen=SIZES_REMEMBERED)
        self._recent_max = 0  # the largest of _recent_costs (0: none yet), asked for once or twice per object
        self._recent_sum = 0  # the sum of _recent_costs
        self._popped_unsized = False  # the object pop() handed out last had no size yet
        # The objects ahead whose window does not reflect their size yet, in input order: what _settle_sizes
        # looks at on every pop (not all of `_ahead`: with 128 ahead that walk was a tenth of the loader's
        # Python time per small object).
        self._unsettled: deque[_Ahead] = deque()
        # An object ahead whose size came is still short of its window for want of budget: the budget freed
        # goes to it before any new object is requested (see has_room_for). May be stale-true after a pop,
        # until the next _settle_sizes.
        self._growth_waiting = False
        self.latency: Optional[float] = None  # lowest first-byte latency seen, in seconds
        self._measured = False  # waited once for the first latency
        self._floor = read_ahead_budget(None, rate, part, max_bytes)  # the least the budget can be
        self.budget = self._floor

    def window_of(self, size: Optional[int]) -> int:
        """The read window an object ahead gets: one part while its size is unknown, else as much of itself
        as it will get once it is read."""
        if size is None:
            return self.part
        return max(1, min(size, self.reading_window))

    def cost_of(self, size: Optional[int]) -> int:
        """The most an object ahead may buffer."""
        if size is None:
            return self.part
        part = self.part
        return max(1, min(size, -(-min(size, self.reading_window) // part) * part))

    def expected_cost_of(self, size: Optional[int]) -> int:
        """What an object ahead is expected to buffer: its cost, estimated from recent objects if its size is
        unknown. The largest recent cost, up to a part (what it holds until its size comes), or the mean
        recent cost if that is more: objects that grow past a part once their size comes keep room for it in
        the budget (counting their first part only let a budget fill with the first parts of far objects),
        and a rare large object among small ones does not shrink how many small ones are requested."""
        if size is not None or not self._recent_costs:
            return self.cost_of(size)
        mean = -(-self._recent_sum // len(self._recent_costs))
        return max(min(self.part, self._recent_max), mean)

    def remember_size(self, size: Optional[int]) -> None:
        """The size of the object pop() handed out last, once its headers came: counted among the recent sizes
        if _settle_sizes had not seen it (it would otherwise never be)."""
        if size is not None and self._popped_unsized:
            self._note_cost(self.cost_of(size))
        self._popped_unsized = False

    def landing_capacity_of(self, size: Optional[int]) -> int:
        """For an object of unknown size, the largest of the recent objects: the GET is offered a result that
        large, received into if the object fills half of it or more (0: nothing to guess from, or a known
        size, whose result is made to measure)."""
        return 0 if size is not None else self._recent_max

    def guessed_length_of(self, size: Optional[int]) -> int:
        """For an object of unknown size, the least it probably holds: its first part if the recent objects
        cost a part or more on average, else 0. That part is received into the reader's results, planned
        before its size is known; it is counted at no less than that until it is read (results planned past a
        shorter object's end are freed with its stream). Only the first part: the later ones begin once the
        window widens, which plans them first. Opening it with the parts the mean suggests instead (its GETs
        beginning with its headers) gained 7-10% MB/s on `s3like` for `read(1 MiB)`, but a reader of whole
        objects plans nothing and then copied every such part out of a pool buffer: 1.42 against 1.02 CPU s/GB
        for `read()` (benchmarks.md, run 36)."""
        if size is not None or not self._recent_costs:
            return 0
        part = self.part
        return part if self._recent_sum >= part * len(self._recent_costs) else 0

    def has_room_for(self, size: Optional[int]) -> bool:
        """Whether an object of ``size`` (None: unknown) may be requested now."""
        ahead = len(self._ahead)
        if not ahead:
            return True  # one object is always allowed, whatever its size
        if ahead > self.max_objects:
            return False
        # Depth before breadth: while an object ahead waits to grow, no new object is requested; the reader
        # needs the nearest objects whole before it needs the first part of a further one. Requesting new
        # objects whenever a part's worth was free kept a large object's window at one part for as long as
        # objects kept coming: on `s3like`, 64 MiB objects of unknown size read at 550 MB/s with 63 first
        # parts ahead, against 3 GB/s once the nearest ones grew.
        if not self._growth_waiting and self._fits(size):
            return True
        if not self._measured:
            self._measure_latency()
        self._settle_sizes()  # small objects whose headers arrived give back most of their part
        # What they gave back goes to an object that waits to grow, if one does, not to a new one. The cost
        # is asked anew, in case what was learned changed it.
        return not self._growth_waiting and self._fits(size)

    def add(self, url: str, stream: _core.ObjectStream, size: Optional[int], guessed_length: int = 0) -> None:
        """Counts an object just requested. ``guessed_length``: what its stream was opened with
        (:meth:`guessed_length_of`, asked before opening it): results planned for it before its size comes."""
        cost, expected = self._costs_of(size)
        ahead = _Ahead(url, stream, size, cost, expected, guessed_length)
        self._ahead.append(ahead)
        self._bytes += cost
        self._expected += expected
        if size is not None:
            self._note_cost(cost)
        else:
            self._unsettled.append(ahead)

    def pop(self) -> tuple[str, _core.ObjectStream]:
        """The next object in input order. Its reader widens its window once it reads it in sequence, so an
        object only sought through (a zip's directory, a Parquet column) fetches no more ahead."""
        self._settle_sizes()
        ahead = self._ahead.popleft()
        if not ahead.sized:
            self._unsettled.popleft()  # the oldest unsettled one: both keep input order
        self._popped_unsized = ahead.size is None  # see remember_size
        self._bytes -= ahead.cost
        self._expected -= ahead.expected
        # Only streams not yet handed out are asked: a reader may have closed its own, or be reading it on
        # another thread. Telemetry lags the data, so the object behind is often the one that has answered.
        # Once a latency put the budget at its floor, no lower one can change it: nothing more to ask.
        if self.latency is None or self.budget > self._floor:
            self._observe_latency(ahead.stream.first_byte_latency)
            if self._ahead:
                self._observe_latency(self._ahead[0].stream.first_byte_latency)
        return ahead.url, ahead.stream

    def __bool__(self) -> bool:
        return bool(self._ahead)

    @property
    def worst_case_bytes(self) -> int:
        """The most the objects ahead may buffer (within ``max_bytes``, or one object's window)."""
        return self._bytes

    @property
    def expected_bytes(self) -> int:
        """What the objects ahead are expected to buffer (within the budget, or one object's window)."""
        return self._expected

    def close(self) -> None:
        """Cancels every download nobody will read."""
        self._unsettled.clear()
        while self._ahead:
            self._ahead.popleft().stream.close()

    def _fits(self, size: Optional[int]) -> bool:
        """Whether an object of `size` (None: unknown) fits, at its cost as of now, the node's free bytes and
        both limits."""
        cost, expected = self._costs_of(size)
        node = self.node_budget
        if node is not None and node.available < cost:
            return False  # the reader takes the next object: its bytes go back to the node
        return self._within_limits(cost, expected)

    def _costs_of(self, size: Optional[int]) -> tuple[int, int]:
        """``(cost_of, expected_cost_of)`` an object of `size`: the same for a known size."""
        cost = self.cost_of(size)
        return cost, cost if size is not None else self.expected_cost_of(size)

    def _within_limits(self, more_bytes: int, more_expected: int) -> bool:
        """Whether both sums may grow by this much: the worst case within max_bytes, the expectation within
        the budget."""
        return self._bytes + more_bytes <= self.max_bytes and self._expected + more_expected <= self.budget

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
        if not self._unsettled:
            # Every object ahead came with its size (a listing's) or has settled: nothing to learn, and none
            # waits to grow (the one that did may have been popped since).
            self._growth_waiting = False
            return
        waiting: Optional[_Ahead] = None  # the first object refused growth: nothing behind it may grow
        still: deque[_Ahead] = deque()
        pending = iter(self._unsettled)
        unanswered = 0  # consecutive objects whose headers have not arrived
        for ahead in pending:
            if ahead.size is None:
                ahead.size = ahead.stream.size_if_known
                if ahead.size is None:
                    still.append(ahead)
                    unanswered += 1
                    if unanswered == UNANSWERED_BEFORE_STOP:
                        # Answers arrive about in request order: the objects behind these are asked later.
                        still.extend(pending)
                        break
                    continue
                unanswered = 0
                self._note_cost(self.cost_of(ahead.size))
                # Until its window is widened it buffers at most what it has: a small object gives back most
                # of its part, and an estimate of its cost is replaced by what it really holds (the results
                # planned on its guessed length included: they are freed only with its stream).
                self._charge(ahead, min(ahead.cost, max(self.cost_of(ahead.size), ahead.planned)))
            cost = self.cost_of(ahead.size)
            if cost > ahead.cost:
                # Growing objects take the budget in input order: a later one never overtakes a refused one.
                if waiting is not None or not self._within_limits(cost - ahead.cost, cost - ahead.expected):
                    if waiting is None:
                        waiting = ahead
                    still.append(ahead)
                    continue
                ahead.stream.widen_window(self.window_of(ahead.size))
                self._charge(ahead, cost)
            ahead.sized = True
        self._unsettled = still
        self._growth_waiting = False
        if waiting is not None:
            # After the whole pass: what the objects behind it gave back (small ones shrinking to their size)
            # is free for it too.
            self._grow_partly(waiting, self.cost_of(waiting.size))
            self._growth_waiting = any(a.size is not None and a.cost < self.cost_of(a.size) for a in still)

    def _grow_partly(self, ahead: _Ahead, cost: int) -> None:
        """Widens a sized object's window by the whole parts the limits have free (its cost is its window's),
        up to `cost`. It stays unsettled: the next pass marks it sized once it has all of `cost`."""
        free = min(self.max_bytes - self._bytes, self.budget - self._expected)
        grown = min(cost, ahead.cost + max(0, free) // self.part * self.part)
        if grown > ahead.cost:
            ahead.stream.widen_window(grown)
            self._charge(ahead, grown)

    def _note_cost(self, cost: int) -> None:
        recent = self._recent_costs
        evicted = recent[0] if len(recent) == recent.maxlen else None
        recent.append(cost)
        self._recent_sum += cost - (evicted or 0)
        if cost >= self._recent_max:
            self._recent_max = cost
        elif evicted == self._recent_max:
            self._recent_max = max(recent)

    def _charge(self, ahead: _Ahead, cost: int) -> None:
        self._bytes += cost - ahead.cost
        self._expected += cost - ahead.expected
        ahead.cost = ahead.expected = cost
