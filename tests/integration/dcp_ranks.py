"""One rank of a torchrun job for test_dcp.py: dcp.save and dcp.load of a state dict sharded over the ranks.

    torchrun --standalone --nproc_per_node 2 dcp_ranks.py SAVE_URL LOAD_URL EXAMPLE_PATH EXAMPLE_URL

Saves version 2 of tests/integration/dcp_state.py's state dict, sharded, to SAVE_URL; loads LOAD_URL (version
1, saved by one process) into the sharded state dict and checks each rank's shard; then runs the README's dcp
example (EXAMPLE_PATH, extracted by the test) against EXAMPLE_URL. Any failure exits non-zero.
"""

from __future__ import annotations

import faulthandler
import importlib.util
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.device_mesh import init_device_mesh

from tests.integration.dcp_state import assert_holds, state_dict
from torchdata_s3.dcp import S3StorageReader, S3StorageWriter

SCRIPT_TIMEOUT_S = 240


def main() -> None:
    save_url, load_url, example_path, example_url = sys.argv[1:5]
    faulthandler.dump_traceback_later(SCRIPT_TIMEOUT_S, exit=True)
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))

    dcp.save(state_dict(2, mesh), storage_writer=S3StorageWriter(save_url))

    target = state_dict(1, mesh, empty=True)
    dcp.load(target, storage_reader=S3StorageReader(load_url))
    assert_holds(target, 1)

    spec = importlib.util.spec_from_file_location("readme_dcp_example", example_path)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    torch.manual_seed(1)
    model = torch.nn.Linear(16, 4)
    example.save_checkpoint(model, example_url)
    torch.manual_seed(2)
    restored = torch.nn.Linear(16, 4)
    example.load_checkpoint(restored, example_url)
    for name, tensor in model.state_dict().items():
        assert torch.equal(restored.state_dict()[name], tensor), name
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
