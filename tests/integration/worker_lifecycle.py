"""Runs DataLoaders over one S3 prefix under one start method; prints, as JSON, what every run read and
whether threads, file descriptors and worker processes came back to the baseline afterwards.

    python worker_lifecycle.py PREFIX_URL START_METHOD

Used by test_dataloader.py. A fresh interpreter, so that thread and descriptor counts are this run's alone.
"""

from __future__ import annotations

import faulthandler
import functools
import gc
import json
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
import warnings
from typing import Any, Optional

from torch.utils.data import DataLoader
from torch.utils.data.datapipes.iter import IterableWrapper

import torchdata_s3
from tests.integration.object_digests import digest_object, record_worker_pid

BATCH_TIMEOUT_S = 60  # DataLoader's wait for any one item from a worker
SETTLE_TIMEOUT_S = 15  # for threads, descriptors and workers to go after a DataLoader is deleted
SCRIPT_TIMEOUT_S = 240  # then every thread's stack is dumped and the process exits

# A tuple (form, num_workers, persistent_workers, full epochs, items read before abandoning an iterator).
Scenario = tuple[str, int, bool, int, Optional[int]]
FULL_MATRIX: list[Scenario] = [
    *[
        (form, workers, False, 1, None)
        for form in ("lister", "loader", "listed-once")
        for workers in (1, 2, 4)
    ],
    ("lister", 2, True, 2, 2),  # persistent workers: two epochs, then a third abandoned mid-way
    ("loader", 2, False, 0, 2),  # abandoned mid-epoch
    ("lister", 4, False, 0, 1),
]
# Each spawned worker imports torch afresh (2-5 s on two cores): worker counts 1, 2 and 4 (1 also in the
# warm-up), each form, persistent workers and abandoned iterators, in as few worker starts as possible.
SPAWN_MATRIX: list[Scenario] = [
    ("lister", 2, False, 1, None),
    ("loader", 4, True, 2, 2),
    ("listed-once", 1, False, 0, 1),
]


def build_pipe(form: str, prefix: str) -> Any:
    if form == "lister":
        pipe = IterableWrapper([prefix]).list_files_by_s3().sharding_filter().load_files_by_s3()
    elif form == "loader":  # the loader expands the prefix and is the sharding point
        pipe = IterableWrapper([prefix]).load_files_by_s3()
    elif form == "listed-once":  # this process lists; workers split the list
        urls = torchdata_s3.list_files_once(prefix)
        pipe = IterableWrapper(urls, deepcopy=False).sharding_filter().load_files_by_s3()
    else:
        raise ValueError(form)
    return pipe.map(digest_object)


def threads_and_descriptors() -> tuple[int, int]:
    return len(os.listdir("/proc/self/task")), len(os.listdir("/proc/self/fd"))


def settle(baseline: tuple[int, int], worker_pids: list[int]) -> tuple[tuple[int, int], list[int], float]:
    """Waits (bounded) for the counts to return to `baseline` and the workers to go; returns what it saw."""
    started = time.monotonic()
    while True:
        gc.collect()
        counts = threads_and_descriptors()
        running = [pid for pid in worker_pids if os.path.exists(f"/proc/{pid}")]
        waited = time.monotonic() - started
        if (counts == baseline and not running) or waited > SETTLE_TIMEOUT_S:
            return counts, running, round(waited, 2)
        time.sleep(0.05)


def run(prefix: str, context: Any, scenario: Scenario, baseline: Optional[tuple[int, int]]) -> dict[str, Any]:
    form, workers, persistent, epochs, abandon_after = scenario
    pid_directory = tempfile.mkdtemp(prefix="worker-pids-")
    started = time.monotonic()
    loader = DataLoader(
        build_pipe(form, prefix),
        batch_size=None,
        num_workers=workers,
        multiprocessing_context=context,
        persistent_workers=persistent,
        timeout=BATCH_TIMEOUT_S,
        worker_init_fn=functools.partial(record_worker_pid, pid_directory),
    )
    read = [[list(item) for item in loader] for _ in range(epochs)]
    abandoned = []
    if abandon_after is not None:
        iterator = iter(loader)
        abandoned = [list(next(iterator)) for _ in range(abandon_after)]
        del iterator
    del loader
    worker_pids = sorted(int(name) for name in os.listdir(pid_directory))
    shutil.rmtree(pid_directory)
    counts, running, settle_s = settle(baseline or threads_and_descriptors(), worker_pids)
    return {
        "form": form,
        "workers": workers,
        "persistent": persistent,
        "epochs": read,
        "abandon_after": abandon_after,
        "abandoned": abandoned,
        "worker_pids": worker_pids,
        "running_after": running,
        "threads_after": counts[0],
        "descriptors_after": counts[1],
        "settle_s": settle_s,
        "seconds": round(time.monotonic() - started, 2),
    }


def main() -> None:
    prefix, start_method = sys.argv[1], sys.argv[2]
    faulthandler.dump_traceback_later(SCRIPT_TIMEOUT_S, exit=True)
    warnings.filterwarnings("ignore", message="This DataLoader will create")  # 4 workers on 2 cores
    context = multiprocessing.get_context(start_method)
    if start_method == "forkserver":
        # Workers fork from a server that has imported torchdata_s3 (but made no S3 client): cheap workers,
        # and the case where a child inherits the package's module state without its native clients.
        context.set_forkserver_preload(["torchdata_s3", "tests.integration.object_digests"])
    matrix = SPAWN_MATRIX if start_method == "spawn" else FULL_MATRIX
    # Warm-up: what a first use creates once and keeps (this process's own S3 client and its event-loop
    # threads for list_files_once, the start method's helper processes) belongs to the baseline.
    warm_up = run(prefix, context, ("listed-once", 1, False, 1, None), None)
    baseline = threads_and_descriptors()
    runs = [run(prefix, context, scenario, baseline) for scenario in matrix]
    print(json.dumps({"baseline": baseline, "warm_up": warm_up, "runs": runs}))
    faulthandler.cancel_dump_traceback_later()


if __name__ == "__main__":
    main()
