"""Client adapters, one module each. Imported lazily: each run happens in its own process."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from benchmarks.workloads import WORKLOADS as _REGISTRY

# name -> module; the order is the order of the report.
CLIENTS = {
    "torchdata_s3": "ours",
    "torchdata_s3-read_chunk": "ours_read_chunk",
    # Issue 22's other ways of reading, and the same read() with every byte copied as upstream CRT does.
    "torchdata_s3-readinto": "ours_readinto",
    "torchdata_s3-lines": "ours_lines",
    "torchdata_s3-copy_out": "ours_copy_out",
    "torchdata_s3-16k_reads": "ours_16k_reads",  # sockets read as upstream aws-c-io does
    "torchdata_s3-unscattered": "ours_unscattered",  # parts copied into read()'s results
    "torchdata_s3-streamed": "ours_streamed",  # small objects streamed, not yielded whole once arrived
    "torchdata_s3-2_connections": "ours_two_connections",  # max_connections=2: a pool for a near endpoint
    "torchdata_s3-tuned": "ours_tuned",  # tune_connections=True: connections learned from the rate
    # The loader over the dataset's prefix: the listing's sizes let small objects land in read()'s result.
    "torchdata_s3-prefix": "ours_prefix",
    "torchdata_s3-open": "ours_open",  # upload-small one writer at a time, beside S3FileSaver
    # Issue 20's entry points, on `small` and `images`: each beside load_files_by_s3 and its peer below.
    # load_files_by_s3 in the dataset doors' 2-worker DataLoader: what those doors are judged against like
    # for like (the headline row above reads in the main process, with no DataLoader).
    "torchdata_s3-dataloader": "ours_dataloader",
    "torchdata_s3-iterable": "ours_iterable",
    "torchdata_s3-map": "ours_map",
    "torchdata_s3-nodes": "ours_nodes",
    "fsspec": "fsspec_opener",
    "s3fs": "s3fs_direct",
    "boto3": "boto3_get",
    "boto3-transfer": "boto3_transfer",
    "torchdata-original": "torchdata_original",
    "s3torchconnector": "s3torchconnector_client",
    "s3torchconnector-iterable": "s3torchconnector_iterable",
    "s3torchconnector-map": "s3torchconnector_map",
    "obstore": "obstore_client",  # reads, writes (issue 22) and listing-scale (issue 21)
    "obstore-fsspec": "obstore_fsspec",  # issue 23's ranges and cat
    "raw-http": "raw_http",
    "socket-floor": "socket_floor",  # issue 22's floor of CPU per GB: one socket, recv_into a reused buffer
    # The same with a read window's memory to receive into: what reading ahead costs the kernel's copy.
    "socket-floor-ahead": "socket_floor_ahead",
    "lines-floor": "lines_floor",  # issue 22's floor of line iteration: io.BytesIO over bytes in memory
    # The DataLoader transport alone (in-memory bytes through the same 2-worker loader): `small`'s second
    # ceiling, the bound of every row that ends in that loader.
    "dataloader-ceiling": "dataloader_ceiling",
    # The `epochs` workload's: ours without its cache, the peers' caches, and the local-disk ceiling.
    "torchdata_s3-nocache": "ours_nocache",
    "fsspec-filecache": "fsspec_filecache",
    "fsspec-simplecache": "fsspec_simplecache",
    "torchdata-on_disk_cache": "torchdata_on_disk_cache",
    "local-disk": "local_disk",
}
OURS = "torchdata_s3"
# Other paths of ours (faster private ones, or one writer at a time), reported beside the headline figure;
# never a peer, never the headline. Every client named after ours is one: derived, so a new variant cannot be
# counted as a peer by being left off a list (torchdata_s3-tuned was, in run 34's reports).
OURS_VARIANTS = tuple(name for name in CLIENTS if name.startswith(OURS + "-"))
# Each dataset variant of ours and the peer doing the same with the same loop around it: the report gives
# their ratio beside "vs ours" (S3Source streams like an iterable dataset, so its peer is the iterable one).
DATASET_PEERS = {
    "torchdata_s3-iterable": "s3torchconnector-iterable",
    "torchdata_s3-map": "s3torchconnector-map",
    "torchdata_s3-nodes": "s3torchconnector-iterable",
}
# load_files_by_s3 in the same 2-worker DataLoader as the dataset doors: each door's like-for-like baseline
# ("within 10% of load_files_by_s3"), reported beside the ratio to the headline (in-process) row.
LOADER_IN_DATALOADER = "torchdata_s3-dataloader"
DATASET_DOORS = tuple(DATASET_PEERS)
CEILING = "raw-http"
SOCKET_FLOOR = "socket-floor"
SOCKET_FLOOR_AHEAD = "socket-floor-ahead"
LINES_FLOOR = "lines-floor"
# Issue 22's other ways of reading, each judged against read_chunk() (no copy) in the same run.
READ_CHUNK = "torchdata_s3-read_chunk"
READ_STYLES = (OURS, "torchdata_s3-readinto", "torchdata_s3-lines")
LINES = "torchdata_s3-lines"
LOCAL_DISK = "local-disk"  # the `epochs` workload's ceiling: the dataset's files read from local disk
# What the 2-worker DataLoader alone moves (no S3): a reference for the rows that end in that loader (not
# torchdata_s3-nodes, whose ParallelMapper threads stay in one process).
DATALOADER_CEILING = "dataloader-ceiling"
DATALOADER_ROWS = (
    LOADER_IN_DATALOADER,
    "torchdata_s3-iterable",
    "torchdata_s3-map",
    "s3torchconnector-iterable",
    "s3torchconnector-map",
)
CEILINGS = (CEILING, LOCAL_DISK, DATALOADER_CEILING, SOCKET_FLOOR, SOCKET_FLOOR_AHEAD, LINES_FLOOR)
# Ceilings that never ask the endpoint: they read the dataset's files the endpoint serves.
LOCAL_FILES = (LOCAL_DISK, LINES_FLOOR)
# Ceilings that deliver no dataset content (curl into /dev/null; bytes made in memory): the content check
# takes their byte count instead of a digest.
CONTENTLESS = (CEILING, DATALOADER_CEILING)
# Clients sending unsigned requests: only the embedded endpoint (no credentials asked) answers them.
UNSIGNED = (CEILING, SOCKET_FLOOR, SOCKET_FLOOR_AHEAD)
WORKLOADS = tuple(_REGISTRY)

# Clients whose measuring process needs packages ahead of the harness's own, put first on its PYTHONPATH:
# directory (relative to the repository) -> the pip requirement installed there (``pip install --no-deps
# --target``) by :func:`ensure_paths` when missing. torchdata.nodes needs torchdata >= 0.10; the harness's
# environment keeps torchdata 0.9, the `torchdata-original` peer's.
TORCHDATA_NODES_PATH = "build/torchdata-0.11"
PATH_REQUIREMENTS = {TORCHDATA_NODES_PATH: "torchdata==0.11.0"}
PYTHONPATH = {"torchdata_s3-nodes": (TORCHDATA_NODES_PATH,)}


def python_path(name: str, repo: Path) -> list[str]:
    """The directories ahead of the harness's on `name`'s measuring process's path (absolute)."""
    return [str(repo / directory) for directory in PYTHONPATH.get(name, ())]


def ensure_paths(names: Iterable[str], repo: Path) -> None:
    """Installs what the clients `names` need on their path (see :data:`PYTHONPATH`) where it is missing:
    ``pip install --no-deps --target <dir> <requirement>`` into a fresh directory, renamed into place once
    complete, so that an interrupted install is never taken for a finished one. If pip fails (no network),
    it says so and goes on: those clients then fail their content check, which the report records."""
    names = list(names)
    for directory in sorted({d for name in names for d in PYTHONPATH.get(name, ())}):
        target = repo / directory
        if target.is_dir():
            continue
        requirement = PATH_REQUIREMENTS[directory]
        needing = ", ".join(name for name in names if directory in PYTHONPATH.get(name, ()))
        # One per process: two test processes may install the same directory at once (the first to finish
        # renames it into place; the other's copy is then dropped).
        partial = target.with_name(f"{target.name}.partial-{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        print(f"installing {requirement} into {target} (for {needing})", file=sys.stderr, flush=True)
        command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(partial)]
        completed = subprocess.run([*command, requirement], check=False)
        if completed.returncode != 0:
            shutil.rmtree(partial, ignore_errors=True)
            print(
                f"could not install {requirement} (pip exit {completed.returncode}): {needing} will fail; "
                f"install it by hand with `pip install --no-deps --target {target} {requirement}`",
                file=sys.stderr,
                flush=True,
            )
            continue
        try:
            partial.rename(target)
        except OSError:
            if not target.is_dir():
                raise
            shutil.rmtree(partial, ignore_errors=True)  # another process finished first


def is_peer(name: str) -> bool:
    return name != OURS and name not in CEILINGS and name not in OURS_VARIANTS


def load(name: str) -> ModuleType:
    return importlib.import_module(f"{__name__}.{CLIENTS[name]}")
