"""Replays the committed fuzz corpus through the fuzz targets' property checks, in every test run.

Each file under tests/fuzz/corpus/<target>/ is one input; a fuzzing run that finds a failure adds its input
here (scripts/fuzz.sh says how), so the failure stays covered after the fix.

Seeds of list_objects_v2: bodies captured from the moto server (a full listing with escaped, unicode and
control-character keys; a truncated page and its continuation; delimiter and prefix listings; an empty
bucket; encoding-type=url; a NoSuchBucket error), S3-shaped documents written after AWS's documentation
(numeric character references, Owner, ChecksumAlgorithm, CommonPrefixes), edge cases (sizes at and past
2**64, truncated without a token, CDATA and comments, deep nesting, bad references) and what the fuzzer
found (fuzzer_found_*). Seeds of s3_url: valid and invalid URLs of every kind parse_s3_url distinguishes.
"""

from __future__ import annotations

import pathlib
from collections import Counter

import pytest

from tests.fuzz.targets import TARGETS

CORPUS_ROOT = pathlib.Path(__file__).resolve().parent / "corpus"

CASES = sorted(
    (target, path) for target in TARGETS for path in (CORPUS_ROOT / target).iterdir() if path.is_file()
)


def test_every_target_has_a_seeded_corpus() -> None:
    counts = Counter(target for target, _path in CASES)
    assert all(counts[target] >= 5 for target in TARGETS), counts


@pytest.mark.parametrize(("target", "path"), CASES, ids=[f"{t}/{p.name}" for t, p in CASES])
def test_corpus_input_keeps_the_properties(target: str, path: pathlib.Path) -> None:
    TARGETS[target](path.read_bytes())
