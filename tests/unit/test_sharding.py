import pytest
from torch.utils.data.datapipes.iter import IterableWrapper
from torch.utils.data.datapipes.iter.sharding import SHARDING_PRIORITIES

from torchdata_s3.datapipes.sharding import ShardSpec, has_sharding_upstream


def owned(spec: ShardSpec, total: int) -> list[int]:
    return [i for i in range(total) if spec.owns(i)]


def test_unsharded_owns_everything() -> None:
    assert owned(ShardSpec(), 5) == [0, 1, 2, 3, 4]


def test_default_group_splits_round_robin() -> None:
    shares = []
    for index in range(3):
        spec = ShardSpec()
        spec.apply(3, index, SHARDING_PRIORITIES.DEFAULT)
        shares.append(owned(spec, 10))
    assert shares == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]


@pytest.mark.parametrize("ranks", [1, 2, 3])
@pytest.mark.parametrize("workers", [1, 2, 4])
def test_groups_combine_like_torch_sharding_filter(ranks: int, workers: int) -> None:
    total = 50
    for rank in range(ranks):
        for worker in range(workers):
            spec = ShardSpec()
            spec.apply(ranks, rank, SHARDING_PRIORITIES.DISTRIBUTED)
            spec.apply(workers, worker, SHARDING_PRIORITIES.MULTIPROCESSING)
            reference = IterableWrapper(range(total)).sharding_filter()
            reference.apply_sharding(ranks, rank, SHARDING_PRIORITIES.DISTRIBUTED)
            reference.apply_sharding(workers, worker, SHARDING_PRIORITIES.MULTIPROCESSING)
            assert owned(spec, total) == list(reference)


def test_mixing_default_and_named_groups_is_refused() -> None:
    spec = ShardSpec()
    spec.apply(2, 0, SHARDING_PRIORITIES.DEFAULT)
    with pytest.raises(RuntimeError, match="cannot mix"):
        spec.apply(2, 1, SHARDING_PRIORITIES.MULTIPROCESSING)


def test_index_out_of_range() -> None:
    with pytest.raises(ValueError, match="outside"):
        ShardSpec().apply(2, 2, SHARDING_PRIORITIES.DEFAULT)


def test_detects_sharding_upstream() -> None:
    plain = IterableWrapper(["s3://b/k"])
    assert not has_sharding_upstream(plain)
    assert has_sharding_upstream(plain.sharding_filter())
    assert has_sharding_upstream(plain.sharding_filter().map(str.upper))
