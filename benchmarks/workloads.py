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
    # The reference row that is not a peer: curl over HTTP, or the same files read from local disk.
    ceiling: str = "raw-http"
    # A second figure per measurement, reported beside the first: (its label, how it is computed).
    secondary: Optional[tuple[str, Callable[[dict[str, Any]], float]]] = None


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
        Workload(
            "epochs",
            "MB/s",
            ("small", "large"),
            _megabytes_per_second,
            "the same dataset read for several epochs through a local cache: later epochs (the figure) and "
            "the first (beside it); the ceiling is the same files read from local disk",
            ceiling="local-disk",
            secondary=("epoch 1", _first_epoch_megabytes_per_second),
        ),
    )
}

HEADLINE = ("large", "small")
"""What a run with no options measures (on both profiles): the issue's targets for object reads."""
