"""How long a resumed epoch takes to its first item, against a fresh epoch's (issue 20's target: a resume at
80% of a 100,000-object epoch replays nothing, so its first item arrives within 2x a fresh epoch's).

    python -m benchmarks.resume_latency [--profile fast|s3like] [--count 100000] [--rounds 5]

On the embedded endpoint, over the `listing` dataset's tiny objects: the state is saved after really
consuming 80% of the epoch through S3IterableDataset (outside the clock). Then, interleaved, each round
builds a dataset (its listing is outside the clock, as a job builds its dataset before training) and times,
with the calls a user makes (its transform reads each object), a fresh epoch (``next(iter(dataset))``) and
a resumed one (``dataset.load_state_dict(state); next(iter(dataset))``), shuffled. Prints medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torchdata_s3
from benchmarks import datasets
from benchmarks.endpoint.nginx import LocalEndpoint


def build(endpoint_url: str, prefix: str) -> torchdata_s3.S3IterableDataset:
    return torchdata_s3.S3IterableDataset.from_prefix(
        prefix,
        shuffle=True,
        seed=1,
        transform=lambda stream: (stream.key, stream.read()),
        endpoint_url=endpoint_url,
        anonymous=True,
    )


def first_item_seconds(dataset: torchdata_s3.S3IterableDataset, state: object = None) -> float:
    start = time.perf_counter()
    if state is not None:
        dataset.load_state_dict(state)  # type: ignore[arg-type]
    iterator = iter(dataset)
    next(iterator)
    elapsed = time.perf_counter() - start
    iterator.close()  # type: ignore[attr-defined]
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="fast", choices=["fast", "s3like"])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--resume-at", type=float, default=0.8, help="fraction of the epoch consumed first")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--data-dir", default="build/bench-data")
    arguments = parser.parse_args()

    root = Path(arguments.data_dir)
    manifest = datasets.ensure_dataset(root, datasets.listing_spec(arguments.count))
    with LocalEndpoint(root, arguments.profile) as endpoint:
        prefix = f"s3://{datasets.BUCKET}/{manifest.spec_name}/"
        dataset = build(endpoint.endpoint_url, prefix)
        consumed = int(arguments.count * arguments.resume_at)
        started = time.perf_counter()
        iterator = iter(dataset)
        for _ in range(consumed):
            next(iterator)
        state = json.loads(json.dumps(dataset.state_dict()))
        iterator.close()  # type: ignore[attr-defined]
        setup_s = time.perf_counter() - started
        fresh, resumed = [], []
        for _ in range(arguments.rounds):
            fresh.append(first_item_seconds(build(endpoint.endpoint_url, prefix)))
            resumed.append(first_item_seconds(build(endpoint.endpoint_url, prefix), state))
    fresh_ms, resumed_ms = statistics.median(fresh) * 1e3, statistics.median(resumed) * 1e3
    print(
        json.dumps(
            {
                "profile": arguments.profile,
                "objects": arguments.count,
                "resumed_after": consumed,
                "consuming_them_s": round(setup_s, 1),
                "state_bytes": len(json.dumps(state)),
                "fresh_first_item_ms": [round(x * 1e3, 2) for x in fresh],
                "resumed_first_item_ms": [round(x * 1e3, 2) for x in resumed],
                "median_fresh_ms": round(fresh_ms, 2),
                "median_resumed_ms": round(resumed_ms, 2),
                "resumed_over_fresh": round(resumed_ms / fresh_ms, 2),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
