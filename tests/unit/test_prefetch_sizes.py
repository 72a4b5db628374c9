"""The prefetch window's memory of recent sizes: what it guesses for an object of unknown size (its expected
cost, and the result the GET is offered to land in) is the largest of the last SIZES_REMEMBERED sizes, also
after the largest has fallen out of them."""

from __future__ import annotations

import random

from torchdata_s3.prefetch import SIZES_REMEMBERED, PrefetchWindow

PART = 8 * 1024 * 1024


def window() -> PrefetchWindow:
    return PrefetchWindow(10_000, 1 << 40, PART, reading_window=8 * PART, rate=1e9)


def test_nothing_is_guessed_before_a_size_is_known() -> None:
    fresh = window()
    assert fresh.landing_capacity_of(None) == 0
    assert fresh.expected_cost_of(None) == PART
    assert fresh.landing_capacity_of(110_000) == 0  # a known size is made to measure


def test_the_guess_is_the_largest_of_the_recent_sizes_as_they_come_and_go() -> None:
    sizes = [random.Random(7).randrange(1, 300_000) for _ in range(5 * SIZES_REMEMBERED)]
    sizes[SIZES_REMEMBERED // 2] = 2_000_000  # the largest, later forgotten
    tracked = window()
    for seen, size in enumerate(sizes, start=1):
        tracked.add(f"s3://b/{seen}", None, size)  # type: ignore[arg-type]  # the stream is not used here
        recent = sizes[max(0, seen - SIZES_REMEMBERED) : seen]
        assert tracked.landing_capacity_of(None) == max(recent), seen
        assert tracked.expected_cost_of(None) == min(PART, max(recent)), seen
