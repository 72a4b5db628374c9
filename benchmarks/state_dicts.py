"""The state dicts the `checkpoint` and `dcp` workloads save and load: float32 tensors generated from seeds.

Every tensor is 2-D (rows of ``COLUMNS`` float32 values), filled from its own seeded generator, so the harness
can compute the expected content digest tensor by tensor (never holding the whole state dict) and the
measuring process can generate the same state dict before its clock starts. For `dcp` each rank holds a
contiguous block of every tensor's rows (``Shard(0)`` over a 1-D mesh): its shard is generated from its own
seed, so no rank ever materializes a whole tensor.
"""

from __future__ import annotations

import zlib
from functools import lru_cache

MiB = 1024 * 1024
COLUMNS = 1024  # 4 KiB rows
BYTES_PER_VALUE = 4  # float32
# The example: 16 tensors of 64 MiB make 1 GiB. Smaller state dicts keep at least 8 tensors.
TENSOR_BYTES_MAX = 64 * MiB
TENSORS_MIN = 8


def layout(total_bytes: int) -> tuple[list[str], list[int]]:
    """``(names, sizes in bytes)`` of a state dict of about `total_bytes` (rounded down to whole rows).

    Tensors are ``TENSOR_BYTES_MAX`` (64 MiB) each, or smaller so that there are at least ``TENSORS_MIN``;
    each is a whole number of 2-row pairs, so that two ranks can split it evenly.
    Raises ValueError for a size below ``TENSORS_MIN`` pairs of rows.
    """
    row_pair = 2 * COLUMNS * BYTES_PER_VALUE
    tensor_bytes = min(TENSOR_BYTES_MAX, total_bytes // TENSORS_MIN) // row_pair * row_pair
    if tensor_bytes <= 0:
        raise ValueError(f"a state dict of {total_bytes} bytes is too small")
    count = total_bytes // tensor_bytes
    return [f"layer{index:03d}.weight" for index in range(count)], [tensor_bytes] * count


def _seed(index: int, rank: int, ranks: int) -> int:
    return 1_000_003 * index + 1009 * ranks + rank


def make_tensor(index: int, size_bytes: int, rank: int = 0, ranks: int = 1):  # type: ignore[no-untyped-def]
    """Tensor `index` (or, with `ranks` > 1, rank `rank`'s block of its rows): uniform float32 in [0, 1)."""
    import torch

    rows = size_bytes // (COLUMNS * BYTES_PER_VALUE) // ranks
    generator = torch.Generator().manual_seed(_seed(index, rank, ranks))
    return torch.rand((rows, COLUMNS), generator=generator, dtype=torch.float32)


def tensor_crc(tensor) -> int:  # type: ignore[no-untyped-def]
    """crc32 of a CPU tensor's bytes (contiguous, as saved)."""
    return zlib.crc32(tensor.contiguous().numpy())


@lru_cache(maxsize=8)
def expected_digest(total_bytes: int, ranks: int = 1) -> int:
    """The content digest of the state dict of `total_bytes` (split over `ranks`): the sum of the crc32 of
    every tensor (or every rank's block), modulo 2**64, as the adapters compute it over what they loaded.
    Generates one tensor at a time."""
    _names, sizes = layout(total_bytes)
    total = 0
    for index, size in enumerate(sizes):
        for rank in range(ranks):
            total += tensor_crc(make_tensor(index, size, rank, ranks))
    return total % (1 << 64)


def state_dict(names: list[str], sizes: list[int]) -> dict:
    """The whole state dict (the `checkpoint` workload's): ``{name: tensor}``."""
    return {name: make_tensor(index, size) for index, (name, size) in enumerate(zip(names, sizes))}


def state_digest(state: dict) -> int:
    """The digest of a loaded ``{name: tensor}`` (DTensors count their local block)."""
    total = 0
    for tensor in state.values():
        local = tensor.to_local() if hasattr(tensor, "to_local") else tensor
        total += tensor_crc(local)
    return total % (1 << 64)
