"""The prefetch window's memory of recent sizes: what it guesses for an object of unknown size (its expected
cost, and the result the GET is offered to land in) is the largest of the last SIZES_REMEMBERED costs, also
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
    assert fresh.guessed_length_of(None) == 0


def test_the_guess_is_the_largest_of_the_recent_sizes_as_they_come_and_go() -> None:
    rng = random.Random(7)  # one generator: a new one per size gave every size the same value
    sizes = [rng.randrange(1, 300_000) for _ in range(5 * SIZES_REMEMBERED)]
    sizes[SIZES_REMEMBERED // 2] = 2_000_000  # the largest, later forgotten
    tracked = window()
    for seen, size in enumerate(sizes, start=1):
        tracked.add(f"s3://b/{seen}", None, size)  # type: ignore[arg-type]  # the stream is not used here
        recent = sizes[max(0, seen - SIZES_REMEMBERED) : seen]
        assert tracked.landing_capacity_of(None) == max(recent), seen
        mean = -(-sum(recent) // len(recent))
        assert tracked.expected_cost_of(None) == max(min(PART, max(recent)), mean), seen


def test_an_object_of_unknown_size_is_expected_to_grow_like_the_recent_ones() -> None:
    # Its first part is all it buffers until its size comes; then it grows to its window, as the recent
    # objects did: the budget keeps that room (a cost is at most the reading window, in whole parts).
    tracked = window()
    assert tracked.expected_cost_of(None) == PART  # nothing known: its first part
    tracked.add("s3://b/large", None, 5 * PART)  # type: ignore[arg-type]  # the stream is not used here
    assert tracked.expected_cost_of(None) == 5 * PART
    tracked.add("s3://b/huge", None, 100 * PART)  # type: ignore[arg-type]
    assert tracked.expected_cost_of(None) == -(-(5 + 8) * PART // 2)  # the mean: huge costs its window
    # Such an object probably fills its first part: it is received into the reader's results from it on.
    assert tracked.guessed_length_of(None) == PART  # its first part: see guessed_length_of
    assert tracked.guessed_length_of(5 * PART) == 0  # a known size is planned from its size instead


def test_a_rare_large_object_among_small_ones_keeps_them_coming() -> None:
    # One 64 MiB object among 110 kB ones: the mean stays far below a part, so an object of unknown size is
    # still expected to cost what the largest small one could hold (a part), not the large one's window.
    tracked = window()
    for index in range(SIZES_REMEMBERED - 1):
        tracked.add(f"s3://b/{index}", None, 110_000)  # type: ignore[arg-type]
    tracked.add("s3://b/large", None, 64 * 1024 * 1024)  # type: ignore[arg-type]
    assert tracked.expected_cost_of(None) == PART
    # Nor is a part's worth of results planned for each small one before its size comes.
    assert tracked.guessed_length_of(None) == 0


def test_objects_just_short_of_a_part_are_not_guessed_to_fill_one() -> None:
    tracked = window()
    for index in range(SIZES_REMEMBERED):
        tracked.add(f"s3://b/{index}", None, PART - 1)  # type: ignore[arg-type]
    assert tracked.guessed_length_of(None) == 0
    tracked.add("s3://b/last", None, 64 * PART)  # type: ignore[arg-type]  # the mean reaches a part
    assert tracked.guessed_length_of(None) == PART
