"""torchdata_s3.nodes.S3Source against a real S3-protocol server, with torchdata >= 0.10 (CI runs this folder
with torchdata 0.11): torchdata's save/load pattern under Loader, Batcher, Prefetcher and ParallelMapper
(threads and processes) at several snapshot points; epochs, shuffling, ranks and elastic resume."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from torchdata.nodes import Batcher, Loader, ParallelMapper, Prefetcher

from tests.integration.dataset_items import key_and_bytes, payload, put_numbered_objects
from tests.nodes.save_load_pattern import check_save_load_state
from torchdata_s3 import DatasetStateError, S3IterableDataset
from torchdata_s3.nodes import S3Source

pytestmark = pytest.mark.integration

COUNT = 17


@pytest.fixture
def prefix(boto_s3, bucket: str) -> str:  # type: ignore[no-untyped-def]
    return put_numbered_objects(boto_s3, bucket, "shards", COUNT)


def keys(items: list) -> list[str]:
    return [key for key, _ in items]


def all_keys() -> list[str]:
    return [f"shards/{index:03d}" for index in range(COUNT)]


def key_only(item: tuple[str, bytes]) -> str:
    """A map function for ParallelMapper (picklable for its processes); checks the bytes on the way."""
    key, data = item
    assert data == payload(int(key.split("/")[1]))
    return key


def source(prefix: str, **arguments) -> S3Source:  # type: ignore[no-untyped-def]
    return S3Source(prefix, shuffle=True, seed=4, transform=key_and_bytes, **arguments)


@pytest.mark.parametrize("midpoint", [0, 1, 5, COUNT - 1])
def test_save_load_pattern_on_the_source(prefix: str, midpoint: int) -> None:
    check_save_load_state(source(prefix), midpoint)


@pytest.mark.parametrize("midpoint", [1, 3])
def test_save_load_pattern_under_batcher(prefix: str, midpoint: int) -> None:
    check_save_load_state(Batcher(source(prefix), batch_size=4, drop_last=False), midpoint)


@pytest.mark.parametrize("snapshot_frequency", [1, 3])
def test_save_load_pattern_under_prefetcher(prefix: str, snapshot_frequency: int) -> None:
    node = Prefetcher(source(prefix), prefetch_factor=4, snapshot_frequency=snapshot_frequency)
    check_save_load_state(node, 6)


@pytest.mark.parametrize("method", ["thread", "process"])
@pytest.mark.parametrize(("midpoint", "snapshot_frequency"), [(2, 1), (7, 2)])
def test_save_load_pattern_under_parallel_mapper(
    prefix: str, method: str, midpoint: int, snapshot_frequency: int
) -> None:
    node = ParallelMapper(
        source(prefix), key_only, num_workers=2, method=method, snapshot_frequency=snapshot_frequency
    )
    check_save_load_state(Prefetcher(node, prefetch_factor=2), midpoint)


def test_each_epoch_is_a_new_permutation_and_key_order_without_shuffle(prefix: str) -> None:
    loader = Loader(source(prefix))
    epoch0, epoch1 = keys(list(loader)), keys(list(loader))
    assert sorted(epoch0) == sorted(epoch1) == all_keys() and epoch0 != epoch1
    ordered = Loader(S3Source(prefix, transform=key_and_bytes))
    assert keys(list(ordered)) == all_keys()
    streams = list(Loader(S3Source(prefix)))
    assert [(stream.key, stream.read()) for stream in streams] == [
        (k, payload(i)) for i, k in enumerate(all_keys())
    ]


def test_ranks_share_the_epoch_and_resume_elastically(prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import torchdata_s3.nodes.source as module

    # Two ranks each read part of epoch 0, then one rank resumes the rest; and one rank's state to three.
    states, seen = [], []
    for rank, count in [(0, 3), (1, 5)]:
        monkeypatch.setattr(module, "rank_and_world_size", lambda rank=rank: (rank, 2))
        node = source(prefix)
        iterator = iter(Loader(node))
        seen += keys([next(iterator) for _ in range(count)])
        states.append(node.state_dict())
    merged = S3IterableDataset.merge_states(states)
    json.dumps(merged)
    monkeypatch.setattr(module, "rank_and_world_size", lambda: (0, 1))
    node = source(prefix)
    node.reset(merged)
    head = keys([next(node) for _ in range(4)])
    one_rank_state = node.state_dict()
    rest = []
    for rank in range(3):
        monkeypatch.setattr(module, "rank_and_world_size", lambda rank=rank: (rank, 3))
        node = source(prefix)
        node.reset(S3IterableDataset.merge_states([one_rank_state]))
        rest += keys(list(node))
    assert Counter(seen + head + rest) == Counter(all_keys())


def test_a_state_of_another_source_is_refused(prefix: str) -> None:
    state = source(prefix).state_dict()
    other = S3Source(prefix, shuffle=True, seed=5, transform=key_and_bytes)
    with pytest.raises(DatasetStateError, match="seed: saved 4, now 5"):
        other.reset(state)


def test_an_empty_prefix_warns_and_every_epoch_is_empty(bucket: str) -> None:
    with pytest.warns(
        UserWarning, match=r"S3Source: no objects under s3://.*/nothing/; every epoch is empty"
    ):
        node = S3Source(f"s3://{bucket}/nothing/", transform=key_and_bytes)
    loader = Loader(node)
    assert list(loader) == [] and list(loader) == []
