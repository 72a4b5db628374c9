"""Eight DataLoader workers streaming large objects, with and without one memory budget for the node
(issue 25: with it, the bytes buffered stay within the budget and throughput within 10% of unbounded).

    python -m benchmarks.node_budget [--profile s3like|fast] [--workers 8] [--budget-mib 512] [--rounds 3]

On the embedded endpoint, over the `large` dataset. Each run is a process of its own: an S3IterableDataset
whose transform reads each object the way a decoder streams it (``read(1 MiB)`` to the end) in a DataLoader of
``--workers`` workers. Three variants, interleaved round by round:

- ``default``: no node budget (each worker's loader within its own ``max_inflight_bytes``);
- ``counted``: a node budget nothing reaches (2^50 bytes): the same run, with its buffered bytes counted;
- ``budget``: ``--budget-mib`` for the whole node.

Reported per variant (medians): MB/s through the DataLoader loop, the peak of the buffered bytes the budget
file counted (variants with one), and the peak RSS of the main process and its workers summed (sampled every
20 ms; it includes each worker's interpreter and torch, so compare it between variants).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks import datasets
from benchmarks.endpoint.nginx import LocalEndpoint

MiB = 1024 * 1024
VARIANTS = ("default", "counted", "budget")
CHUNK = MiB


def _stream_through(stream) -> int:  # type: ignore[no-untyped-def]
    total = 0
    while True:
        chunk = stream.read(CHUNK)
        if not chunk:
            return total
        total += len(chunk)


def _rss_of_tree(root: int) -> int:
    """RSS of `root` and its children (DataLoader workers), from /proc."""
    total = 0
    pids = [root]
    try:
        for task in os.listdir(f"/proc/{root}/task"):
            with open(f"/proc/{root}/task/{task}/children") as children:
                pids.extend(int(pid) for pid in children.read().split())
    except OSError:
        pass
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm") as statm:
                total += int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            pass
    return total


def one_run(arguments: argparse.Namespace) -> dict:
    """The measurement in this process: one epoch through the DataLoader, timed from iter() to its end."""
    import torch.utils.data  # the child's import, outside the parent

    import torchdata_s3

    options: dict = {"endpoint_url": arguments.endpoint_url, "anonymous": True}
    if arguments.variant != "default":
        limit = 1 << 50 if arguments.variant == "counted" else arguments.budget_mib * MiB
        options.update(node_memory_budget_bytes=limit, node_memory_budget_file=arguments.budget_file)
    dataset = torchdata_s3.S3IterableDataset.from_prefix(
        arguments.prefix, transform=_stream_through, **options
    )
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=arguments.workers)
    peak_rss = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak_rss
        while not done.wait(0.02):
            peak_rss = max(peak_rss, _rss_of_tree(os.getpid()))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    total = sum(loader)
    elapsed = time.perf_counter() - started
    done.set()
    sampler.join()
    result = {"bytes": total, "seconds": elapsed, "rss_peak_bytes": peak_rss}
    if arguments.variant != "default":
        budget = torchdata_s3.S3Client(torchdata_s3.S3Config.resolve(**options)).node_budget
        assert budget is not None
        result["buffered_peak_bytes"] = budget.peak
        result["held_after_bytes"] = budget.in_use
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="s3like", choices=["fast", "s3like"])
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--budget-mib", type=int, default=512)
    parser.add_argument("--count", type=int, default=32)
    parser.add_argument("--size-mib", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data-dir", default="build/bench-data")
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)  # one run, in a child
    parser.add_argument("--endpoint-url", help=argparse.SUPPRESS)
    parser.add_argument("--prefix", help=argparse.SUPPRESS)
    parser.add_argument("--budget-file", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.variant:
        print("RESULT " + json.dumps(one_run(arguments)), flush=True)
        return

    root = Path(arguments.data_dir)
    manifest = datasets.ensure_dataset(root, datasets.large_spec(arguments.count, arguments.size_mib))
    expected = arguments.count * arguments.size_mib * MiB
    runs: dict[str, list[dict]] = {variant: [] for variant in VARIANTS}
    with LocalEndpoint(root, arguments.profile) as endpoint, tempfile.TemporaryDirectory() as scratch:
        for round_number in range(arguments.rounds):
            for variant in VARIANTS:
                budget_file = os.path.join(
                    scratch, f"{variant}-{round_number}.budget"
                )  # a fresh peak per run
                command = [
                    sys.executable, "-m", "benchmarks.node_budget", "--variant", variant,
                    "--endpoint-url", endpoint.endpoint_url, "--workers", str(arguments.workers),
                    "--budget-mib", str(arguments.budget_mib), "--budget-file", budget_file,
                    "--prefix", f"s3://{datasets.BUCKET}/{manifest.spec_name}/",
                ]  # fmt: skip
                output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
                result = json.loads(output.split("RESULT ", 1)[1])
                if result["bytes"] != expected:
                    raise SystemExit(f"{variant} read {result['bytes']} bytes, expected {expected}")
                runs[variant].append(result)
                print(variant, round_number, json.dumps(result), file=sys.stderr, flush=True)

    def median(variant: str, key: str) -> float:
        return statistics.median(run[key] for run in runs[variant])

    summary: dict = {
        "profile": arguments.profile,
        "workers": arguments.workers,
        "objects": f"{arguments.count} x {arguments.size_mib} MiB",
        "budget_mib": arguments.budget_mib,
        "rounds": arguments.rounds,
    }
    for variant in VARIANTS:
        rates = [run["bytes"] / run["seconds"] / 1e6 for run in runs[variant]]
        row = {
            "MB_per_s": [round(rate) for rate in rates],
            "median_MB_per_s": round(statistics.median(rates)),
            "median_rss_peak_MiB": round(median(variant, "rss_peak_bytes") / MiB),
        }
        if variant != "default":
            row["buffered_peak_MiB"] = [round(run["buffered_peak_bytes"] / MiB) for run in runs[variant]]
            row["held_after_MiB"] = max(run["held_after_bytes"] for run in runs[variant]) / MiB
        summary[variant] = row
    summary["budget_over_default_MB_per_s"] = round(
        summary["budget"]["median_MB_per_s"] / summary["default"]["median_MB_per_s"], 3
    )
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
