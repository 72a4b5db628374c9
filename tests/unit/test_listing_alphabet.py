"""The alphabet parallel listing measures key ranges with (torchdata_s3/listing.py): numbers that keep
the keys' order, so a range's halfway point lies between its ends."""

from __future__ import annotations

import random

from torchdata_s3.listing import DELIMITER, SPLIT_DIGITS, _Alphabet

SEEN = "0123456789abcdef._-"


def alphabet() -> _Alphabet:
    learned = _Alphabet()
    learned.learn(SEEN)
    return learned


def random_texts(count: int, characters: str, seed: int) -> list[str]:
    chooser = random.Random(seed)
    return ["".join(chooser.choices(characters, k=chooser.randrange(0, 30))) for _ in range(count)]


def test_numbers_keep_the_order_of_texts_made_of_seen_characters() -> None:
    measure = alphabet()
    texts = sorted(set(random_texts(2000, SEEN, seed=1)))
    numbers = [measure.number(text) for text in texts]
    assert numbers == sorted(numbers)
    # Distinct within the digits the numbers hold: texts that differ there get different numbers.
    assert len({text[:SPLIT_DIGITS] for text in texts}) == len(set(numbers))


def test_text_inverts_number_within_its_digits() -> None:
    measure = alphabet()
    for text in random_texts(500, SEEN, seed=2):
        assert measure.text(measure.number(text)) == text[:SPLIT_DIGITS]


def test_unseen_characters_keep_the_order_up_to_where_they_stand() -> None:
    # An unseen character ranks with the seen one below it, so two texts are told apart by the digits up to
    # their first difference as long as no unseen character comes before it; after a tie on an unseen
    # character the rest of the digits may disagree with the text. Numbers are only estimates of a range's
    # length: split points are checked against the range's ends as text (ParallelListing._split).
    measure = alphabet()
    texts = sorted(set(random_texts(2000, SEEN + "xyzXYZ~!", seed=3)))
    compared = 0
    for lower, higher in zip(texts, texts[1:]):
        first_difference = next(
            (i for i, (a, b) in enumerate(zip(lower, higher)) if a != b), min(len(lower), len(higher))
        )
        if first_difference < SPLIT_DIGITS and set(
            lower[: first_difference + 1] + higher[: first_difference + 1]
        ) <= set(SEEN):
            assert measure.number(lower) < measure.number(higher), (lower, higher)
            compared += 1
    assert compared > 100


def test_a_midpoint_lies_between_its_ends() -> None:
    measure = alphabet()
    low, high = measure.number("3a"), measure.number("c0f")
    middle = measure.text((low + high) // 2)
    assert "3a" < middle < "c0f"
    assert measure.number("") == 0 and measure.top > measure.number("f" * SPLIT_DIGITS)


def test_learning_skips_the_delimiter_and_versions_every_change() -> None:
    measure = _Alphabet()
    measure.learn("b/a")
    assert measure.characters == ["a", "b"] and DELIMITER not in measure.characters
    version = measure.version
    measure.learn("ab/ba")  # nothing new: numbers measured before stay valid
    assert measure.version == version
    measure.learn("c")
    assert measure.version == version + 1 and measure.characters == ["a", "b", "c"]
