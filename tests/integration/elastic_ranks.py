"""One rank of a torchrun job for test_elastic_resume.py: S3IterableDataset under StatefulDataLoader with 2
workers, saved mid-epoch and resumed, with the same or another number of ranks.

    torchrun --standalone --nproc_per_node R elastic_ranks.py MODE WORK_DIR PREFIX

MODE:
- ``save``: each rank reads ``rank + 1`` batches, saves its loader state (WORK_DIR/state-rank<r>.pt) and the
  keys it consumed, then reads on to the end of the epoch and records that rest (what a resume must give).
  Rank 0 also merges every rank's state (all_gather_object) into WORK_DIR/merged.pt.
- ``resume-same``: each rank loads its own loader state and reads the rest of the epoch; here the dataset is
  built before ``init_process_group`` and the workers are spawned, so they learn their rank from the
  dataset's pickle.
- ``resume-elastic``: each rank loads the merged state into its dataset and reads what it deals it.
Every rank writes what it read to WORK_DIR/<mode>-rank<r>.json.
"""

from __future__ import annotations

import faulthandler
import json
import sys
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torchdata.stateful_dataloader import StatefulDataLoader

from tests.integration.dataset_items import key_and_bytes
from torchdata_s3 import S3IterableDataset

SCRIPT_TIMEOUT_S = 240


def keys_of(batch: list) -> list[str]:
    return [key for key, _data in batch]


def main() -> None:
    mode, work, prefix = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    faulthandler.dump_traceback_later(SCRIPT_TIMEOUT_S, exit=True)
    if mode == "resume-same":
        dataset = S3IterableDataset.from_prefix(prefix, shuffle=True, seed=21, transform=key_and_bytes)
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    if mode != "resume-same":
        dataset = S3IterableDataset.from_prefix(prefix, shuffle=True, seed=21, transform=key_and_bytes)
    if mode == "resume-elastic":
        dataset.load_state_dict(torch.load(work / "merged.pt", weights_only=False))
    context = "spawn" if mode == "resume-same" else "fork"
    loader = StatefulDataLoader(
        dataset, batch_size=2, num_workers=2, collate_fn=keys_of, multiprocessing_context=context
    )
    if mode == "resume-same":
        loader.load_state_dict(torch.load(work / f"state-rank{rank}.pt", weights_only=False))

    report: dict[str, list[str]] = {}
    iterator = iter(loader)
    if mode == "save":
        report["consumed"] = [key for _ in range(rank + 1) for key in next(iterator)]
        state = loader.state_dict()
        torch.save(state, work / f"state-rank{rank}.pt")
        states: list = [None] * world
        dist.all_gather_object(states, state)
        if rank == 0:
            torch.save(S3IterableDataset.merge_states(states), work / "merged.pt")
    report["rest"] = [key for batch in iterator for key in batch]
    (work / f"{mode}-rank{rank}.json").write_text(json.dumps(report))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
