"""S3IterableDataset and S3MapDataset against a real S3-protocol server: order, sharding, shuffling, epochs,
resume (same layout and elastic), bad input, and DataLoaders with 0 and 2 workers under fork and spawn."""

from __future__ import annotations

import json
import pickle
import warnings
from collections import Counter

import pytest
import torch
from torch.utils.data import DataLoader

import torchdata_s3
from tests.integration.dataset_items import as_list, key_and_bytes, payload
from torchdata_s3 import DatasetStateError, MissingObjectWarning, S3IterableDataset, S3MapDataset
from torchdata_s3.reader import S3ObjectStream

pytestmark = pytest.mark.integration

COUNT = 23  # not a multiple of any layout used below, so shards differ in length


@pytest.fixture
def prefix(boto_s3, bucket: str) -> str:  # type: ignore[no-untyped-def]
    for index in range(COUNT):
        boto_s3.put_object(Bucket=bucket, Key=f"data/{index:03d}.bin", Body=payload(index))
    boto_s3.put_object(Bucket=bucket, Key="data/folder/", Body=b"")  # a console's folder marker: skipped
    boto_s3.put_object(Bucket=bucket, Key="other/x.bin", Body=b"not in the prefix")
    return f"s3://{bucket}/data/"


def keys(items: list) -> list[str]:
    return [key for key, _ in items]


def expected_keys() -> list[str]:
    return [f"data/{index:03d}.bin" for index in range(COUNT)]


def test_the_iterable_dataset_yields_streams_in_key_order(prefix: str) -> None:
    dataset = S3IterableDataset.from_prefix(prefix)
    streams = list(dataset)
    assert [stream.key for stream in streams] == expected_keys()
    for index, stream in enumerate(streams):
        assert stream.url == f"{prefix}{index:03d}.bin"
        assert stream.bucket == prefix.split("/")[2]
        assert stream.read() == payload(index)
        stream.seek(3)
        assert stream.read(4) == payload(index)[3:7]
    assert dataset.urls == [stream.url for stream in streams]


def test_from_objects_keeps_the_given_order(prefix: str) -> None:
    urls = [f"{prefix}{index:03d}.bin" for index in (5, 1, 9)]
    items = list(S3IterableDataset.from_objects(urls, transform=key_and_bytes))
    assert items == [(f"data/{index:03d}.bin", payload(index)) for index in (5, 1, 9)]


@pytest.mark.parametrize("shards", [2, 3, 40])
def test_shards_cover_the_epoch_exactly_once(
    prefix: str, shards: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset = S3IterableDataset.from_prefix(prefix, shuffle=True, seed=7, transform=key_and_bytes)
    seen: list[str] = []
    for shard in range(shards):
        monkeypatch.setattr(dataset, "_layout", lambda shard=shard: (shards, shard))
        seen += keys(list(dataset))
        dataset.set_epoch(0)
    assert sorted(seen) == expected_keys()  # no duplicate, no gap, also with more shards than objects


def test_shuffle_is_a_permutation_per_seed_and_epoch(prefix: str) -> None:
    first = S3IterableDataset.from_prefix(prefix, shuffle=True, seed=1, transform=key_and_bytes)
    again = S3IterableDataset.from_prefix(prefix, shuffle=True, seed=1, transform=key_and_bytes)
    other_seed = S3IterableDataset.from_prefix(prefix, shuffle=True, seed=2, transform=key_and_bytes)
    epoch0 = keys(list(first))
    epoch1 = keys(list(first))  # a second iteration of the same object is the next epoch
    assert sorted(epoch0) == sorted(epoch1) == expected_keys()
    assert epoch0 != epoch1 and epoch0 != expected_keys()
    assert keys(list(again)) == epoch0
    again.set_epoch(1)
    assert keys(list(again)) == epoch1
    again.set_epoch(1)
    assert keys(list(again)) == epoch1  # set_epoch pins it
    assert keys(list(other_seed)) != epoch0


@pytest.mark.parametrize(("workers", "start_method"), [(0, None), (2, "fork"), (2, "spawn")])
def test_a_dataloader_reads_every_object_once(prefix: str, workers: int, start_method: str) -> None:
    dataset = S3IterableDataset.from_prefix(prefix, shuffle=True, transform=key_and_bytes)
    loader = DataLoader(dataset, batch_size=None, num_workers=workers, multiprocessing_context=start_method)
    items = list(loader)
    assert sorted(keys(items)) == expected_keys()
    assert all(data == payload(int(key[5:8])) for key, data in items)


def test_persistent_workers_read_a_new_order_each_epoch(prefix: str) -> None:
    dataset = S3IterableDataset.from_prefix(prefix, shuffle=True, transform=key_and_bytes)
    loader = DataLoader(dataset, batch_size=None, num_workers=2, persistent_workers=True)
    epoch0, epoch1 = keys(list(loader)), keys(list(loader))
    assert sorted(epoch0) == sorted(epoch1) == expected_keys()
    assert epoch0 != epoch1


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("stop_after", [0, 1, 10, COUNT - 1, COUNT])
def test_a_resumed_iteration_yields_exactly_the_rest(prefix: str, shuffle: bool, stop_after: int) -> None:
    dataset = S3IterableDataset.from_prefix(prefix, shuffle=shuffle, seed=3, transform=key_and_bytes)
    dataset.set_epoch(2)
    iterator = iter(dataset)
    head = [next(iterator) for _ in range(stop_after)]
    state = dataset.state_dict()
    rest = list(iterator)
    following_epoch = list(dataset)
    json.dumps(state)  # JSON-safe
    assert len(json.dumps(state)) < 1000 and "001.bin" not in json.dumps(state)  # no key list

    resumed = S3IterableDataset.from_prefix(prefix, shuffle=shuffle, seed=3, transform=key_and_bytes)
    resumed.load_state_dict(json.loads(json.dumps(state)))
    resumed.set_epoch(2)  # as a training loop does on resume: keeps the loaded state of that epoch
    assert list(resumed) == rest
    assert list(resumed) == following_epoch
    assert (
        head + rest
        == list(
            S3IterableDataset.from_prefix(prefix, shuffle=shuffle, seed=3, transform=key_and_bytes).__iter__()
        )
        or shuffle
    )


def test_a_resume_fetches_nothing_already_consumed(prefix: str, moto_server) -> None:  # type: ignore[no-untyped-def]
    dataset = S3IterableDataset.from_prefix(prefix, transform=key_and_bytes, prefetch=1)
    iterator = iter(dataset)
    consumed = [next(iterator) for _ in range(15)]
    state = dataset.state_dict()
    iterator.close()
    resumed = S3IterableDataset.from_prefix(prefix, transform=key_and_bytes, prefetch=1)
    resumed.load_state_dict(state)
    before = len(moto_server.logged_requests())
    rest = list(resumed)
    fetched = [line for line in moto_server.logged_requests()[before:] if line.startswith("GET /")]
    assert keys(consumed) + keys(rest) == expected_keys()
    assert not any(key in line for key in keys(consumed) for line in fetched)


def test_elastic_resume_yields_every_unconsumed_object_once(
    prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def build() -> S3IterableDataset:
        return S3IterableDataset.from_prefix(prefix, shuffle=True, seed=5, transform=key_and_bytes)

    # Three readers (say 3 ranks) each read a different amount, then the job stops.
    states, consumed = [], []
    for shard, count in enumerate([4, 0, 7]):
        dataset = build()
        monkeypatch.setattr(dataset, "_layout", lambda shard=shard: (3, shard))
        iterator = iter(dataset)
        consumed += keys([next(iterator) for _ in range(count)])
        states.append({"rank": shard, "loader": {"nested": [dataset.state_dict()]}})
    merged = S3IterableDataset.merge_states(states)
    json.dumps(merged)
    # ... and resumes with 2 readers, then 5 readers mid-way through that: each object exactly once.
    seen = list(consumed)
    resumed_states = []
    for shard, count in enumerate([2, 3]):
        dataset = build()
        dataset.load_state_dict(merged)
        monkeypatch.setattr(dataset, "_layout", lambda shard=shard: (2, shard))
        iterator = iter(dataset)
        seen += keys([next(iterator) for _ in range(count)])
        resumed_states.append(dataset.state_dict())
    merged_again = S3IterableDataset.merge_states(resumed_states)
    for shard in range(5):
        dataset = build()
        dataset.load_state_dict(merged_again)
        monkeypatch.setattr(dataset, "_layout", lambda shard=shard: (5, shard))
        seen += keys(list(dataset))
    assert Counter(seen) == Counter(expected_keys())


def test_merging_an_incomplete_set_of_states_is_refused(prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    dataset = S3IterableDataset.from_prefix(prefix, transform=key_and_bytes)
    monkeypatch.setattr(dataset, "_layout", lambda: (3, 1))
    next(iter(dataset))
    with pytest.raises(DatasetStateError, match=r"shards \[0, 2\] of 3 are missing"):
        S3IterableDataset.merge_states([dataset.state_dict()])
    with pytest.raises(DatasetStateError, match="appears twice"):
        S3IterableDataset.merge_states([dataset.state_dict(), dataset.state_dict()])
    # A single shard's state resumed by another layout is refused, not misapplied.
    other = S3IterableDataset.from_prefix(prefix, transform=key_and_bytes)
    other.load_state_dict(dataset.state_dict())
    with pytest.raises(DatasetStateError, match=r"shard 1 of 3.*merge the states"):
        next(iter(other))


def test_merging_states_whose_first_lost_its_identity_is_refused_typed(
    prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first state's identity is what the others are checked against: a damaged one (a hand-edited or
    # truncated checkpoint) is refused as such, not met with a TypeError from inside the check.
    states = []
    for shard in range(2):
        dataset = S3IterableDataset.from_prefix(prefix, transform=key_and_bytes)
        monkeypatch.setattr(dataset, "_layout", lambda shard=shard: (2, shard))
        next(iter(dataset))
        states.append(dataset.state_dict())
    states[0]["dataset"] = None
    with pytest.raises(DatasetStateError, match="malformed dataset state: no dataset identity"):
        S3IterableDataset.merge_states(states)


def test_a_state_from_another_dataset_is_refused_saying_what_differs(
    prefix: str, boto_s3, bucket: str
) -> None:  # type: ignore[no-untyped-def]
    dataset = S3IterableDataset.from_prefix(prefix, shuffle=True, seed=1)
    state = dataset.state_dict()
    with pytest.raises(DatasetStateError, match="seed: saved 1, now 2"):
        S3IterableDataset.from_prefix(prefix, shuffle=True, seed=2).load_state_dict(state)
    with pytest.raises(DatasetStateError, match="shuffle: saved True, now False"):
        S3IterableDataset.from_prefix(prefix, seed=1).load_state_dict(state)
    with pytest.raises(DatasetStateError, match=f"URLs: saved from \\['{prefix}'\\]"):
        S3IterableDataset.from_prefix(f"s3://{bucket}/other/", shuffle=True, seed=1).load_state_dict(state)
    with pytest.raises(DatasetStateError, match="not a state of S3IterableDataset"):
        dataset.load_state_dict({"epoch": 0})
    boto_s3.delete_object(Bucket=bucket, Key="data/004.bin")
    with pytest.raises(
        DatasetStateError, match=f"listing: {COUNT} objects when the state was saved, {COUNT - 1} now"
    ):
        S3IterableDataset.from_prefix(prefix, shuffle=True, seed=1).load_state_dict(state)


def test_objects_deleted_before_resume_raise_naming_them_or_are_skipped(
    prefix: str, boto_s3, bucket: str
) -> None:  # type: ignore[no-untyped-def]
    urls = S3IterableDataset.from_prefix(prefix).urls
    dataset = S3IterableDataset.from_objects(urls, transform=key_and_bytes)
    iterator = iter(dataset)
    first = [next(iterator) for _ in range(5)]
    state = dataset.state_dict()
    iterator.close()
    boto_s3.delete_object(Bucket=bucket, Key="data/009.bin")

    strict = S3IterableDataset.from_objects(urls, transform=key_and_bytes)
    strict.load_state_dict(state)
    with pytest.raises(torchdata_s3.S3FileNotFoundError, match=r"data/009\.bin") as raised:
        list(strict)
    assert raised.value.url == f"{prefix}009.bin"

    lenient = S3IterableDataset.from_objects(urls, transform=key_and_bytes, skip_missing=True)
    lenient.load_state_dict(state)
    with pytest.warns(MissingObjectWarning, match=r"data/009\.bin"):
        rest = list(lenient)
    assert keys(first) + keys(rest) == [key for key in expected_keys() if key != "data/009.bin"]


@pytest.mark.parametrize("skip_missing", [False, True])
def test_an_object_deleted_after_the_listing_raises_at_its_turn_or_is_skipped(  # type: ignore[no-untyped-def]
    prefix: str, boto_s3, bucket: str, skip_missing: bool
) -> None:
    # The listing gave its size: the dataset must still wait for its answer before yielding it, so that the
    # error comes at its turn, typed and naming it, and not from inside the transform's read.
    dataset = S3IterableDataset.from_prefix(prefix, transform=key_and_bytes, skip_missing=skip_missing)
    boto_s3.delete_object(Bucket=bucket, Key="data/002.bin")
    iterator = iter(dataset)
    assert keys([next(iterator), next(iterator)]) == ["data/000.bin", "data/001.bin"]
    if skip_missing:
        with pytest.warns(MissingObjectWarning, match=r"skipped s3://.*/data/002\.bin"):
            assert next(iterator)[0] == "data/003.bin"
    else:
        with pytest.raises(torchdata_s3.S3FileNotFoundError) as raised:
            next(iterator)
        assert raised.value.url == f"{prefix}002.bin"


def test_an_empty_prefix_warns_for_the_iterable_and_raises_for_the_map_dataset(bucket: str) -> None:
    with pytest.warns(UserWarning, match="no objects under s3://.*/nothing/; every epoch is empty"):
        dataset = S3IterableDataset.from_prefix(f"s3://{bucket}/nothing/")
    assert list(dataset) == []
    with pytest.raises(
        torchdata_s3.S3FileNotFoundError, match=f"S3MapDataset: no objects under s3://{bucket}/nothing/"
    ):
        S3MapDataset.from_prefix(f"s3://{bucket}/nothing/")


def test_bad_arguments_are_refused_by_name(prefix: str) -> None:
    with pytest.raises(IsADirectoryError, match="names a prefix, not an object"):
        S3IterableDataset.from_objects([prefix])
    with pytest.raises(torchdata_s3.InvalidS3UrlError):
        S3IterableDataset.from_prefix("/local/path")
    with pytest.raises(TypeError, match="unknown S3 option"):
        S3IterableDataset.from_prefix(prefix, shufle=True)
    with pytest.raises(ValueError, match="prefetch must be"):
        S3MapDataset.from_prefix(prefix, prefetch=-1)
    with pytest.raises(ValueError, match="epoch must be"):
        S3IterableDataset.from_prefix(prefix).set_epoch(-1)


def test_the_map_dataset_indexes_in_key_order_and_fetches_batches(prefix: str) -> None:
    dataset = S3MapDataset.from_prefix(prefix, transform=key_and_bytes)
    assert len(dataset) == COUNT
    assert dataset[3] == ("data/003.bin", payload(3))
    assert dataset[-1] == (f"data/{COUNT - 1:03d}.bin", payload(COUNT - 1))
    assert dataset.__getitems__([7, 2, 7]) == [dataset[7], dataset[2], dataset[7]]
    with pytest.raises(IndexError, match=f"index {COUNT} is out of range"):
        dataset[COUNT]
    assert dataset[torch.tensor(4).item()] == dataset[4]
    stream = S3MapDataset.from_prefix(prefix)[0]
    assert (stream.key, stream.read()) == ("data/000.bin", payload(0))


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_the_map_dataset_in_a_shuffled_dataloader(prefix: str, start_method: str, moto_server) -> None:  # type: ignore[no-untyped-def]
    dataset = S3MapDataset.from_prefix(prefix, transform=key_and_bytes)
    pickled = pickle.loads(pickle.dumps(dataset))  # what a spawned worker gets: no listing again
    assert len(pickled) == COUNT
    before = sum("list-type=2" in line for line in moto_server.logged_requests())
    loader = DataLoader(
        dataset,
        batch_size=4,
        shuffle=True,
        num_workers=2,
        multiprocessing_context=start_method,
        collate_fn=as_list,
        generator=torch.Generator().manual_seed(0),
    )
    items = [item for batch in loader for item in batch]
    assert sorted(keys(items)) == expected_keys()
    assert all(data == payload(int(key[5:8])) for key, data in items)
    assert sum("list-type=2" in line for line in moto_server.logged_requests()) == before


def test_a_stream_sent_to_another_process_says_what_to_do(prefix: str) -> None:
    stream = S3MapDataset.from_prefix(prefix)[0]
    with pytest.raises(TypeError, match="transform="):
        pickle.dumps(stream)


def test_the_stream_goes_to_the_libraries_users_hand_it_to(prefix: str, boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    import io

    import numpy

    buffer = io.BytesIO()
    numpy.save(buffer, numpy.arange(10))
    boto_s3.put_object(Bucket=bucket, Key="arrays/a.npy", Body=buffer.getvalue())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (array,) = list(S3IterableDataset.from_prefix(f"s3://{bucket}/arrays/", transform=numpy.load))
    assert array.tolist() == list(range(10))


def read_and_count(stream: S3ObjectStream) -> tuple[str, bytes, int]:
    data = stream.read()
    return stream.key, data, stream.bytes_fetched


def test_the_local_cache_serves_the_epochs_after_the_first(prefix: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    dataset = S3IterableDataset.from_prefix(
        prefix, shuffle=True, transform=read_and_count, cache_dir=str(tmp_path)
    )
    first, second = list(dataset), list(dataset)
    assert sorted(key for key, _, _ in first) == sorted(key for key, _, _ in second) == expected_keys()
    assert all(data == payload(int(key[5:8])) for key, data, _ in first + second)
    assert all(fetched == len(data) for _, data, fetched in first)
    assert all(fetched == 0 for _, _, fetched in second)  # from the cache: nothing fetched from S3
