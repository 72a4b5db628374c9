"""The workloads: one registry of what each measures, in what unit, on which dataset, and how its figure is
computed from a measurement. Everything else (the command line, the runner, the report) looks them up here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional


@dataclass(frozen=True)
class Workload:
    name: str
    unit: str
    datasets: tuple[str, ...]  # the datasets it reads, a case (variant) each (see benchmarks.datasets)
    figure: Callable[[dict[str, Any]], float]  # the reported number, from a measurement's result dict
    description: str
    higher_is_better: bool = True
    # CPU seconds per GB is meaningful where the bytes are the work; not for listing (no bytes), `gil`
    # (its counting thread burns a core on purpose) or `random` (a few MB delivered).
    cpu_per_gb: bool = True
    # The reference row that is not a peer: curl over HTTP, or the same files read from local disk ("": none).
    ceiling: str = "raw-http"
    # A second figure per measurement, reported beside the first: (its label, how it is computed).
    secondary: Optional[tuple[str, Callable[[dict[str, Any]], float]]] = None
    # Whether ours' figure over its own second figure means something (later epochs over the first does; a
    # checkpoint's save seconds over its load seconds do not).
    figure_over_secondary: bool = False
    # It writes to the endpoint: each measurement gets a fresh prefix, deleted afterwards (see
    # benchmarks.writes), and runs on an endpoint started to accept writes.
    writes: bool = False

    @property
    def function(self) -> str:
        """The adapter function that implements it (a client runs the workload if it has one)."""
        return self.name.replace("-", "_")


def _megabytes_per_second(result: dict[str, Any]) -> float:
    return result["bytes"] / 1e6 / result["seconds"]


def _items_per_second(result: dict[str, Any]) -> float:
    return result["items"] / result["seconds"]


def _first_epoch_megabytes_per_second(result: dict[str, Any]) -> float:
    return result["bytes"] / 1e6 / result["extra"]["epoch_seconds"][0]


def _pace_percent(result: dict[str, Any]) -> float:
    return result["extra"]["pace_percent"]


def _seconds(result: dict[str, Any]) -> float:
    return result["seconds"]


def _save_seconds(result: dict[str, Any]) -> float:
    return result["extra"]["save_seconds"]


def _load_seconds(result: dict[str, Any]) -> float:
    return result["extra"]["load_seconds"]


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload(
            "text",
            "samples/s",
            ("text",),
            _items_per_second,
            "the announcement's text shards through DataLoader + readlines, per batch size and worker count",
        ),
        Workload("large", "MB/s", ("large",), _megabytes_per_second, "read every large object to its end"),
        Workload("small", "objects/s", ("small",), _items_per_second, "read every small object to its end"),
        Workload("listing", "keys/s", ("list",), _items_per_second, "list every key", cpu_per_gb=False),
        # Issue 21: listing a prefix of 10^6 (or 10^7) generated keys, 100 ms per page, on an endpoint of its
        # own (benchmarks.listing_scale); not part of --full (sequential peers take ~2 min per listing).
        Workload(
            "listing-scale",
            "keys/s",
            (),
            _items_per_second,
            "list a prefix of 10^6 generated keys (tree or flat) at 100 ms per page, as user code iterates "
            "it; time to the first key in the JSON",
            cpu_per_gb=False,
            ceiling="",
        ),
        Workload(
            "whole",
            "MB/s",
            ("large",),
            _megabytes_per_second,
            "read every large object whole: one read() per object, as a loader's transform does",
        ),
        Workload("stream", "MB/s", ("huge",), _megabytes_per_second, "one huge object in 1 MiB read() calls"),
        Workload(
            "gil",
            "pace %",
            ("large",),
            _pace_percent,
            "a pure-Python thread's pace while the large objects are read",
            cpu_per_gb=False,
        ),
        Workload(
            "images",
            "images/s",
            ("images",),
            _items_per_second,
            "JPEG objects decoded with PIL in a DataLoader with workers, each client in its idiomatic form",
        ),
        Workload(
            "random",
            "s",
            ("random",),
            _seconds,
            "one column of a many-column Parquet file, or a few members of a large zip, via a file object",
            higher_is_better=False,
            cpu_per_gb=False,  # the few MB delivered make it meaningless; the CPU seconds are in the JSON
        ),
        # Issue 23's fsspec door: bulk reads as fsspec users make them.
        Workload(
            "ranges",
            "ranges/s",
            ("large",),
            _items_per_second,
            "1,000 ranges of 16 KiB at random offsets (fixed seed) of one large object through the file "
            "system's cat_ranges",
            cpu_per_gb=False,  # 16 MB delivered; the CPU seconds are in the JSON
            ceiling="",
        ),
        Workload(
            "cat",
            "objects/s",
            ("small",),
            _items_per_second,
            "every small object through one call of the file system's cat(list of paths)",
            ceiling="",
        ),
        Workload(
            "get-file",
            "MB/s",
            ("huge",),
            _megabytes_per_second,
            "one huge object downloaded to a local file by the client's own call (fsspec get_file, boto3 "
            "download_file)",
            ceiling="",
        ),
        Workload(
            "put-file",
            "MB/s",
            ("huge",),
            _megabytes_per_second,
            "one huge local file uploaded by the client's own call (fsspec put_file, boto3 upload_file)",
            ceiling="",
            writes=True,
        ),
        Workload(
            "epochs",
            "MB/s",
            ("small", "large"),
            _megabytes_per_second,
            "the same dataset read for several epochs through a local cache: later epochs (the figure) and "
            "the first (beside it); the ceiling is the same files read from local disk",
            ceiling="local-disk",
            secondary=("epoch 1", _first_epoch_megabytes_per_second),
            figure_over_secondary=True,
        ),
        # Issue 12's write path. The uploads send the `large` and `small` datasets' objects (read into memory
        # before the clock), and `upload-stream` the `huge` one, read from its file in 1 MiB pieces.
        Workload(
            "upload-large",
            "MB/s",
            ("large",),
            _megabytes_per_second,
            "upload each large object from memory, one object at a time; the ceiling: curl PUTs every "
            "object whole, 16 at once",
            writes=True,
        ),
        Workload(
            "upload-small",
            "objects/s",
            ("small",),
            _items_per_second,
            "upload every small object from memory, through each client's bulk path; the ceiling: curl "
            "PUTs, 64 at once",
            writes=True,
        ),
        Workload(
            "upload-stream",
            "MB/s",
            ("huge",),
            _megabytes_per_second,
            "one huge object written in 1 MiB write() calls from its file (RSS growth: the memory target)",
            ceiling="",
            writes=True,
        ),
        Workload(
            "checkpoint",
            "s",
            (),
            _save_seconds,
            "torch.save then torch.load of a state dict of float32 tensors: save seconds, load seconds "
            "beside it; CPU per GB counts the bytes saved plus those loaded",
            higher_is_better=False,
            ceiling="",
            secondary=("load s", _load_seconds),
            writes=True,
        ),
        Workload(
            "dcp",
            "s",
            (),
            _save_seconds,
            "torch.distributed.checkpoint save then load of a state dict sharded over 2 ranks (gloo on CPU), "
            "timed by rank 0 between barriers: save seconds, load seconds beside it",
            higher_is_better=False,
            ceiling="",
            secondary=("load s", _load_seconds),
            writes=True,
        ),
    )
}

WRITES = tuple(name for name, workload in WORKLOADS.items() if workload.writes)


OPT_IN = ("listing-scale",)
"""Workloads only run when named in --workloads (not by --full or --quick)."""

HEADLINE = ("large", "small")
"""What a run with no options measures (on both profiles): the issue's targets for object reads."""
