"""The prefetch window reads ahead depth first: an object whose size came and that is short of its window
takes freed budget before any new object is requested, and that rule never stops read-ahead for good. Streams
are stand-ins here (answers arrive when the test says); the same rules against a real server are in
tests/integration/test_read_ahead.py."""

from __future__ import annotations

import random
from typing import Optional

from torchdata_s3.prefetch import PrefetchWindow

PART = 8 * 1024 * 1024
LATENCY_S = 0.01  # with the rate below, a budget as large as max_bytes


class AnsweredLater:
    """An object stream whose response headers (its size) arrive when `answer()` is called."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.answered = False
        self.window = 0
        self.closed = False

    def answer(self) -> None:
        self.answered = True

    @property
    def size_if_known(self) -> Optional[int]:
        return self.size if self.answered else None

    @property
    def first_byte_latency(self) -> Optional[float]:
        return LATENCY_S if self.answered else None

    def wait_for_first_byte_latency(self) -> float:
        self.answered = True
        return LATENCY_S

    def widen_window(self, window_bytes: int) -> None:
        self.window = max(self.window, window_bytes)

    def close(self) -> None:
        self.closed = True


def window(max_bytes: int) -> PrefetchWindow:
    return PrefetchWindow(64, max_bytes, PART, reading_window=8 * PART, rate=1e15)


def short_of_their_window(prefetch: PrefetchWindow) -> list[str]:
    return [a.url for a in prefetch._ahead if a.size is not None and a.cost < prefetch.cost_of(a.size)]


def test_popping_the_object_that_waited_to_grow_lets_read_ahead_go_on() -> None:
    # A 64 MiB object of unknown size, then listed 1 MiB objects: the large one waits to grow in a budget of
    # four parts. Once the reader takes it, nothing waits any more: the listed objects behind it must still be
    # requested ahead (a flag left over from it refused every object for the rest of the run).
    prefetch = window(4 * PART)
    large = AnsweredLater(8 * PART)
    prefetch.add("large", large, None)  # type: ignore[arg-type]
    listed = 0
    while prefetch.has_room_for(PART // 8):
        prefetch.add(f"listed-{listed}", AnsweredLater(PART // 8), PART // 8)  # type: ignore[arg-type]
        listed += 1
    assert short_of_their_window(prefetch) == ["large"]
    assert large.window == prefetch._ahead[0].cost < 8 * PART  # it took what was free, in whole parts
    assert prefetch.pop()[0] == "large"
    assert prefetch.has_room_for(PART // 8)


def test_budget_given_back_goes_to_the_object_that_waits_not_to_a_new_one() -> None:
    # Random sizes (small, a few parts, larger than the read window), answers arriving in random order, the
    # loader's own loop: whenever the window admits a new object, no object ahead whose size it knows is short
    # of its window; every object is delivered, in order.
    rng = random.Random(22)
    sizes = [rng.choice([100_000, 3 * PART, 9 * PART]) for _ in range(400)]
    prefetch = window(12 * PART)
    streams: list[AnsweredLater] = []
    delivered = 0
    for index, size in enumerate(sizes):
        while True:
            for stream in streams[delivered:]:
                if rng.random() < 0.3:
                    stream.answer()
            if prefetch.has_room_for(None):
                break
            assert prefetch.pop()[0] == f"object-{delivered}"
            delivered += 1
        assert not short_of_their_window(prefetch), f"object-{index} admitted while they wait to grow"
        assert len(prefetch._ahead) == 0 or prefetch.worst_case_bytes <= 12 * PART
        streams.append(AnsweredLater(size))
        prefetch.add(f"object-{index}", streams[-1], None, prefetch.guessed_length_of(None))  # type: ignore[arg-type]
        # What it was admitted at is what it is counted at (the one object always allowed aside).
        if len(prefetch._ahead) > 1:
            assert prefetch.worst_case_bytes <= prefetch.max_bytes, f"object-{index}"
            assert prefetch.expected_bytes <= prefetch.budget, f"object-{index}"
    while prefetch:
        assert prefetch.pop()[0] == f"object-{delivered}"
        delivered += 1
    assert delivered == len(sizes)
    # Objects that waited got their windows: the large ones read ahead grew past their first part.
    assert any(stream.window > PART for stream in streams)


def test_an_object_shorter_than_its_guess_is_counted_at_the_results_planned_for_it() -> None:
    # After large objects, one of unknown size has results planned for its first part before its size came;
    # they are freed only with its stream: it must not give that memory back to the window when it turns out
    # small (new objects would be requested on memory still held).
    prefetch = window(40 * PART)
    for index in range(3):
        prefetch.add(f"listed-{index}", AnsweredLater(8 * PART), 8 * PART)  # type: ignore[arg-type]
    assert prefetch.guessed_length_of(None) == prefetch.window_of(None) == prefetch.cost_of(None) == PART
    assert prefetch.has_room_for(None)
    small = AnsweredLater(PART // 8)
    prefetch.add("small", small, None, prefetch.guessed_length_of(None))  # type: ignore[arg-type]
    small.answer()
    prefetch._settle_sizes()
    assert prefetch._ahead[-1].cost == PART
    assert prefetch.worst_case_bytes == 25 * PART
