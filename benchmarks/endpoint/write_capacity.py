"""How fast the write endpoint takes uploads, and what that costs it: many parallel PUTs by curl.

    python -m benchmarks.endpoint.write_capacity --data-root /dev/shm/capacity [--profile fast]
        [--parallel 8] [--object-mib 64] [--objects 32] [--rounds 3]

Starts a ``LocalEndpoint(writes=True)`` on ``--data-root`` (created if missing; its bucket ``capacity`` is
removed at the end), then per round uploads ``--objects`` objects of ``--object-mib`` MiB with
``curl --parallel --parallel-max N`` (one connection per transfer in flight, body from a file in /dev/shm)
and prints the aggregate rate (GB/s, 10^9 bytes/s) and the CPU seconds the endpoint's processes (nginx
master and workers, the sidecar, the pacing relay) used, read from /proc before and after. curl's own CPU is
not counted. Linux only.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

from benchmarks.endpoint.nginx import LocalEndpoint, ensure_nginx_installed
from benchmarks.endpoint.nginx_config import PROFILES
from benchmarks.endpoint.process_cpu import cpu_seconds

BUCKET = "capacity"


def measure_round(endpoint: LocalEndpoint, body_file: Path, objects: int, parallel: int) -> dict[str, float]:
    """One round of uploads; returns ``seconds``, ``gb_per_s`` and ``endpoint_cpu_seconds``."""
    with tempfile.NamedTemporaryFile("w", suffix=".curl") as config:
        for number in range(objects):
            config.write(
                f'upload-file = "{body_file}"\nurl = "{endpoint.endpoint_url}/{BUCKET}/object-{number}"\n'
            )
            config.write('output = "/dev/null"\n')
        config.flush()
        pids = endpoint.process_ids()
        cpu_before = cpu_seconds(pids)
        started = time.perf_counter()
        command = ["curl", "--silent", "--fail", "--parallel", "--parallel-max", str(parallel)]
        # curl 7.88 prints its parallel progress meter even with --silent: capture, show on failure.
        curl = subprocess.run([*command, "--config", config.name], capture_output=True)
        seconds = time.perf_counter() - started
        cpu = cpu_seconds(pids) - cpu_before
    if curl.returncode != 0:
        raise RuntimeError(
            f"curl exited with {curl.returncode}: {curl.stderr.decode(errors='replace')[-2000:]}"
        )
    return {
        "seconds": seconds,
        "gb_per_s": objects * body_file.stat().st_size / seconds / 1e9,
        "endpoint_cpu_seconds": cpu,
    }


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data-root", type=Path, required=True)
    parser.add_argument("--profile", choices=PROFILES, default="fast")
    parser.add_argument("--latency-ms", type=float, default=30.0)
    parser.add_argument("--bandwidth-mbps", type=float, default=90.0)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--object-mib", type=int, default=64)
    parser.add_argument("--objects", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    arguments = parser.parse_args(argv)
    ensure_nginx_installed()
    (arguments.data_root / BUCKET).mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir="/dev/shm", suffix=".body") as body:
        body.write(os.urandom(arguments.object_mib * 1024 * 1024))
        body.flush()
        endpoint = LocalEndpoint(
            arguments.data_root,
            arguments.profile,
            arguments.latency_ms,
            arguments.bandwidth_mbps,
            writes=True,
        )
        try:
            with endpoint:
                for _ in range(arguments.rounds):
                    result = measure_round(endpoint, Path(body.name), arguments.objects, arguments.parallel)
                    cpu_s, seconds = result["endpoint_cpu_seconds"], result["seconds"]
                    print(
                        f"{arguments.profile}, {arguments.parallel} connections, {arguments.objects} x "
                        f"{arguments.object_mib} MiB: {result['gb_per_s']:.2f} GB/s in {seconds:.2f} s; "
                        f"endpoint CPU {cpu_s:.2f} s ({cpu_s / seconds:.0%} of a core)",
                        flush=True,
                    )
        finally:
            shutil.rmtree(arguments.data_root / BUCKET, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
