"""The state dict the dcp tests save and load: whole (one process) or as DTensors sharded by rows over a
device mesh (one shard per rank), with a replicated tensor and non-tensor values beside them. Each version
has different values, so a load proves which checkpoint it read."""

from __future__ import annotations

from typing import Any, Optional

import torch

ROWS, COLUMNS = 1024, 512  # 2 MiB of float32: rows split evenly over 1 or 2 ranks


def full_tensors(version: int) -> dict[str, torch.Tensor]:
    weight = torch.arange(ROWS * COLUMNS, dtype=torch.float32).reshape(ROWS, COLUMNS) + 1_000_000 * version
    return {"weight": weight, "bias": torch.full((COLUMNS,), float(version))}


def state_dict(version: int, mesh: Optional[Any] = None, *, empty: bool = False) -> dict[str, Any]:
    """``{"model": {"weight", "bias"}, "step", "meta"}`` of `version`; `empty`: zeros, a target to load into.

    With `mesh`, ``weight`` is a DTensor sharded by rows over it and ``bias`` a replicated DTensor.
    """
    tensors = full_tensors(version)
    if empty:
        tensors = {name: torch.zeros_like(tensor) for name, tensor in tensors.items()}
    if mesh is not None:
        from torch.distributed.tensor import DTensor, Replicate, Shard

        rows = ROWS // mesh.size()
        rank = mesh.get_local_rank()
        shard = tensors["weight"][rank * rows : (rank + 1) * rows].clone()
        tensors = {
            "weight": DTensor.from_local(shard, mesh, [Shard(0)], run_check=False),
            "bias": DTensor.from_local(tensors["bias"], mesh, [Replicate()], run_check=False),
        }
    return {
        "model": tensors,
        "step": 0 if empty else 100 * version,
        "meta": {"name": "" if empty else f"v{version}"},
    }


def assert_holds(state: dict[str, Any], version: int) -> None:
    """`state` (whole or sharded) holds exactly `version`'s values."""
    expected = state_dict(version, getattr(state["model"]["weight"], "device_mesh", None))
    for name, tensor in state["model"].items():
        local = getattr(tensor, "to_local", lambda t=tensor: t)()
        wanted = getattr(expected["model"][name], "to_local", lambda t=expected["model"][name]: t)()
        assert torch.equal(local, wanted), (name, version)
    assert state["step"] == expected["step"] and state["meta"] == expected["meta"], (
        state["step"],
        state["meta"],
    )
