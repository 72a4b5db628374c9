"""One rank of a torchrun job: reads a dataset through DataLoaders with 2 workers and writes, per (pipeline,
rank, worker), the objects that worker read, as JSON files in REPORT_DIR.

    torchrun --standalone --nproc_per_node 2 distributed_pipeline.py REPORT_DIR RECIPE_PATH BUCKET

The bucket holds the same objects under lister/, loader/ and recipe/, one prefix per pipeline, so that the
server's log tells how often each pipeline listed. RECIPE_PATH is the README's distributed example, extracted
by the test: its make_loader() is what the "recipe" pipeline runs. Used by test_distributed.py.
"""

from __future__ import annotations

import faulthandler
import importlib.util
import json
import sys
from collections import defaultdict
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch.distributed as dist
from torch.utils.data import DataLoader
from torch.utils.data.datapipes.iter import IterableWrapper

import torchdata_s3
from tests.integration.object_digests import digest_object

NUM_WORKERS = 2
BATCH_TIMEOUT_S = 60
COLLECTIVE_TIMEOUT = timedelta(seconds=60)
SCRIPT_TIMEOUT_S = 240


def load_recipe(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("readme_recipe", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def report(loader: DataLoader, name: str, report_dir: Path, rank: int) -> None:
    by_worker: dict[int, list] = defaultdict(list)
    for url, digest, pid, worker_id in loader:
        by_worker[worker_id].append([url, digest, pid])
    for worker_id, items in by_worker.items():
        path = report_dir / f"{name}-rank{rank}-worker{worker_id}.json"
        path.write_text(json.dumps(items))


def main() -> None:
    report_dir, recipe_path, bucket = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    faulthandler.dump_traceback_later(SCRIPT_TIMEOUT_S, exit=True)
    dist.init_process_group("gloo", timeout=COLLECTIVE_TIMEOUT)
    rank = dist.get_rank()

    # torchdata's classic pipeline: every worker of every rank lists, the sharding_filter splits.
    pipe = IterableWrapper([f"s3://{bucket}/lister/"]).list_files_by_s3().sharding_filter()
    pipe = pipe.load_files_by_s3().map(digest_object)
    report(
        DataLoader(pipe, batch_size=None, num_workers=NUM_WORKERS, timeout=BATCH_TIMEOUT_S),
        "lister",
        report_dir,
        rank,
    )

    # The loader handed the prefix: it lists and is itself the sharding point.
    pipe = IterableWrapper([f"s3://{bucket}/loader/"]).load_files_by_s3().map(digest_object)
    report(
        DataLoader(pipe, batch_size=None, num_workers=NUM_WORKERS, timeout=BATCH_TIMEOUT_S),
        "loader",
        report_dir,
        rank,
    )

    # The same without workers: DataLoader shards over the ranks alone, in each rank's main process.
    pipe = IterableWrapper([f"s3://{bucket}/loader/"]).load_files_by_s3().map(digest_object)
    report(DataLoader(pipe, batch_size=None, num_workers=0), "loader-in-main", report_dir, rank)

    # The README's recipe: listed once for the job, shuffled, split; two epochs.
    loader = load_recipe(recipe_path).make_loader(f"s3://{bucket}/recipe/", transform=digest_object)
    for epoch in range(2):
        report(loader, f"recipe-epoch{epoch}", report_dir, rank)

    # A listing failure on the listing rank reaches every rank instead of leaving them waiting.
    try:
        torchdata_s3.list_files_once(f"s3://{bucket}-missing/")
        outcome = "listed"
    except torchdata_s3.S3FileNotFoundError as error:
        outcome = f"{type(error).__name__}: {error.url}"
    # In a worker (which inherits the process group) the collective is refused instead of hanging.
    pipe = IterableWrapper([f"s3://{bucket}/recipe/"]).map(torchdata_s3.list_files_once)
    try:
        list(DataLoader(pipe, batch_size=None, num_workers=1, timeout=BATCH_TIMEOUT_S))
        in_worker = "listed"
    except RuntimeError as error:
        in_worker = "refused" if "collective for the main process" in str(error) else repr(error)
    failures = {"missing bucket": outcome, "in a worker": in_worker}
    (report_dir / f"failures-rank{rank}.json").write_text(json.dumps(failures))

    dist.barrier()
    dist.destroy_process_group()
    faulthandler.cancel_dump_traceback_later()


if __name__ == "__main__":
    main()
