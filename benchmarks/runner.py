"""Running measurements: each in its own process, clients interleaved round by round."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Optional

from benchmarks.clients import CEILING
from benchmarks.clients.common import Context

REPO = Path(__file__).resolve().parent.parent

# Credentials the local endpoint ignores; set so that no client goes looking for real ones.
BENCH_ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "benchmark",
    "AWS_SECRET_ACCESS_KEY": "benchmark",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


@dataclass
class Case:
    """One comparison: a workload (and variant) that every client runs on the same data."""

    workload: str  # text | large | small | listing
    variant: str  # e.g. "batch=512 workers=2", or "" when there is none
    context: Context
    expected_items: int
    expected_digest: Optional[int]
    unit: str  # what throughput counts: "samples/s", "MB/s", "objects/s", "keys/s"


@dataclass
class Run:
    client: str
    workload: str
    variant: str
    round: int
    throughput: float
    seconds: float
    items: int
    bytes: int
    rss_growth_bytes: int
    rss_peak_bytes: int
    error: str = ""
    extra: dict = field(default_factory=dict)


def throughput(case: Case, result: dict) -> float:
    if case.unit == "pace %":
        return result["extra"]["pace_percent"]
    if case.unit == "MB/s":
        return result["bytes"] / 1e6 / result["seconds"]
    return result["items"] / result["seconds"]


def measure(client: str, case: Case, environment: dict[str, str], timeout_s: float) -> dict:
    """Runs one measurement in a fresh interpreter and returns its result dict."""
    command = [sys.executable, "-m", "benchmarks.measure", client, case.workload]
    env = dict(os.environ, **BENCH_ENVIRONMENT, **environment)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    completed = subprocess.run(
        command,
        input=json.dumps(asdict(case.context)),  # on stdin: a listing's keys overflow a command line
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        cwd=str(REPO),
    )
    for line in completed.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    tail = (completed.stderr or completed.stdout)[-1500:]
    raise RuntimeError(
        f"{client} {case.workload} {case.variant} failed (exit {completed.returncode}): {tail}"
    )


def check(client: str, case: Case, result: dict, *, content: bool) -> None:
    """A client that read the wrong bytes is not measured: fail loudly instead.

    Every run must deliver the expected number of items; the verification run (``content=True``, where the
    adapter computes a digest) must also deliver exactly the dataset's content.
    """
    if result["items"] != case.expected_items:
        raise RuntimeError(
            f"{client} {case.workload}: read {result['items']} items, expected {case.expected_items}"
        )
    if content and client != CEILING and result["digest"] != case.expected_digest:
        raise RuntimeError(f"{client} {case.workload}: content digest differs from the dataset's")


def run_interleaved(
    cases: list[Case],
    clients_for: Callable[[Case], list[str]],
    rounds: int,
    environment: dict[str, str],
    timeout_s: float,
    on_run: Callable[[Run], None],
) -> list[Run]:
    """For each case: one verified run per client, then `rounds` timed rounds of A B C ... A B C ..."""
    runs: list[Run] = []
    for case in cases:
        clients = clients_for(case)
        for client in clients:  # correctness first, untimed
            verified = Case(
                **{**asdict(case), "context": Context(**{**asdict(case.context), "verify": True})}
            )
            check(client, case, measure(client, verified, environment, timeout_s), content=True)
        for round_number in range(rounds):
            order = clients if round_number % 2 == 0 else list(reversed(clients))
            for client in order:
                try:
                    result = measure(client, case, environment, timeout_s)
                    check(client, case, result, content=False)
                    run = Run(
                        client,
                        case.workload,
                        case.variant,
                        round_number,
                        throughput(case, result),
                        result["seconds"],
                        result["items"],
                        result["bytes"],
                        max(result["rss_peak_bytes"], result["children_rss_peak_bytes"])
                        - result["rss_start_bytes"],
                        result["rss_peak_bytes"],
                        extra=result.get("extra", {}),
                    )
                except (RuntimeError, subprocess.TimeoutExpired) as error:
                    run = Run(
                        client, case.workload, case.variant, round_number, 0.0, 0.0, 0, 0, 0, 0, str(error)
                    )
                runs.append(run)
                on_run(run)
    return runs
