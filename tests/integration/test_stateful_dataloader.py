"""S3IterableDataset under torchdata's StatefulDataLoader (torchdata 0.9 in the main run, 0.11 in the
torchdata-0.11 run): a loader state taken mid-epoch resumes exactly the batches the uninterrupted run would
still have yielded, then the next epoch, with 0 and 2 workers, fork and spawn; and every rank's loader state
merges into an elastic resume."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.integration.dataset_items import key_and_bytes, put_numbered_objects
from torchdata_s3 import S3IterableDataset

stateful_dataloader = pytest.importorskip("torchdata.stateful_dataloader", reason="torchdata >= 0.8")
StatefulDataLoader = stateful_dataloader.StatefulDataLoader

pytestmark = pytest.mark.integration

COUNT = 30


@pytest.fixture
def prefix(boto_s3, bucket: str) -> str:  # type: ignore[no-untyped-def]
    return put_numbered_objects(boto_s3, bucket, "train", COUNT)


def keys_of(batch: list) -> list[str]:
    return [key for key, _data in batch]


def build(prefix: str) -> S3IterableDataset:
    return S3IterableDataset.from_prefix(prefix, shuffle=True, seed=11, transform=key_and_bytes)


def loader_of(dataset: S3IterableDataset, workers: int, start_method: str | None) -> StatefulDataLoader:
    return StatefulDataLoader(
        dataset,
        batch_size=3,
        num_workers=workers,
        multiprocessing_context=start_method,
        collate_fn=keys_of,
    )


@pytest.mark.parametrize(("workers", "start_method"), [(0, None), (2, "fork"), (2, "spawn")])
@pytest.mark.parametrize("stop_after", [1, 4])
def test_a_loader_state_resumes_the_rest_of_the_epoch_then_the_next(
    prefix: str, workers: int, start_method: str | None, stop_after: int
) -> None:
    loader = loader_of(build(prefix), workers, start_method)
    iterator = iter(loader)
    head = [next(iterator) for _ in range(stop_after)]
    state = loader.state_dict()
    rest = list(iterator)
    assert sorted(key for batch in head + rest for key in batch) == [f"train/{i:03d}" for i in range(COUNT)]

    resumed = loader_of(build(prefix), workers, start_method)
    resumed.load_state_dict(state)
    assert list(resumed) == rest


def test_the_epoch_after_a_resume_is_the_uninterrupted_runs_next_epoch(prefix: str) -> None:
    dataset = build(prefix)
    loader = loader_of(dataset, 0, None)
    iterator = iter(loader)
    next(iterator)
    state = loader.state_dict()
    list(iterator)
    next_epoch = list(loader)

    resumed = loader_of(build(prefix), 0, None)
    resumed.load_state_dict(state)
    list(resumed)
    assert list(resumed) == next_epoch


def test_loader_states_of_every_rank_merge_into_an_elastic_resume(
    prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two "ranks" of 2 workers each stop after different numbers of batches; one rank of 2 workers resumes.
    import torchdata_s3.datasets.iterable as iterable

    states, consumed = [], []
    for rank, batches in [(0, 3), (1, 1)]:
        monkeypatch.setattr(iterable, "rank_and_world_size", lambda rank=rank: (rank, 2))
        loader = loader_of(build(prefix), 2, "fork")
        iterator = iter(loader)
        consumed += [key for _ in range(batches) for key in next(iterator)]
        states.append(loader.state_dict())
        del iterator
    monkeypatch.setattr(iterable, "rank_and_world_size", lambda: (0, 1))
    dataset = build(prefix)
    dataset.load_state_dict(S3IterableDataset.merge_states(states))
    rest = [key for batch in loader_of(dataset, 2, "fork") for key in batch]
    assert Counter(consumed + rest) == Counter(f"train/{i:03d}" for i in range(COUNT))
