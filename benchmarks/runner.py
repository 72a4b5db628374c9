"""Running measurements: each in its own process, clients interleaved round by round."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Optional

from benchmarks.clients import CEILING, CONTENTLESS, python_path
from benchmarks.clients.common import Context
from benchmarks.endpoint.access_log import AccessLog
from benchmarks.endpoint.process_cpu import cpu_seconds
from benchmarks.workloads import WORKLOADS

# Not resolved: started from a view of the checkout that imports another build (scripts/variant-build.sh),
# the measurement processes run in that view too, and import that build rather than the checkout's sources.
REPO = Path(__file__).absolute().parent.parent

# Credentials the local endpoint ignores; set so that no client goes looking for real ones.
BENCH_ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "benchmark",
    "AWS_SECRET_ACCESS_KEY": "benchmark",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
    # botocore >= 1.36 (boto3, s3fs) adds a CRC32 to every upload by default, in an aws-chunked trailer over
    # HTTPS, which the embedded endpoint need not accept; S3 requires none. Ours and s3torchconnector send
    # none by default. (Downloads are unaffected: this is the request side only.)
    "AWS_REQUEST_CHECKSUM_CALCULATION": "when_required",
}


class MeasurementFailed(RuntimeError):
    """The measuring process failed (an exception, a crash): the client could not do the workload."""


@dataclass
class Case:
    """One comparison: a workload (and variant) that every client runs on the same data."""

    workload: str  # a name in benchmarks.workloads.WORKLOADS
    variant: str  # e.g. "batch=512 workers=2", or "" when there is none
    context: Context
    expected_items: int
    expected_digest: Optional[int]
    unit: str  # the workload's unit: "samples/s", "MB/s", "objects/s", "keys/s", "s", ...


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
    cpu_seconds: Optional[float] = None  # of the timed section; see common.process_cpu_seconds
    fetched_bytes: Optional[int] = None  # body bytes the endpoint sent during the measurement's process
    requests: Optional[int] = None  # requests the endpoint answered in the same window
    # CPU seconds of the endpoint's processes in the same window (the embedded endpoint only).
    endpoint_cpu_seconds: Optional[float] = None
    # The whole machine's CPU over the timed section: used, and available (clients.common.MachineTime).
    machine_busy_seconds: Optional[float] = None
    machine_available_seconds: Optional[float] = None
    extra: dict = field(default_factory=dict)


def rss_growth(result: dict) -> int:
    """Peak RSS over the timed work's start: the process's, or a worker's; or what the adapter measured in
    processes of its own (dcp's ranks, which hold the state dict)."""
    if "rss_growth_bytes" in result:
        return result["rss_growth_bytes"]
    return max(result["rss_peak_bytes"], result["children_rss_peak_bytes"]) - result["rss_start_bytes"]


def throughput(case: Case, result: dict) -> float:
    """The case's reported figure (named throughput; for `random` it is seconds)."""
    return WORKLOADS[case.workload].figure(result)


def measure(
    client: str,
    case: Case,
    environment: dict[str, str],
    timeout_s: float,
    access_log: Optional[AccessLog] = None,
    endpoint_processes: Sequence[int] = (),
) -> dict:
    """Runs one measurement in a fresh interpreter and returns its result dict.

    With ``access_log`` (the embedded endpoint's), the result also holds ``fetched_bytes`` and ``requests``:
    what the endpoint served while the process ran, untimed set-up included. With ``endpoint_processes``
    (their pids), it holds ``endpoint_cpu_seconds``, the CPU they used in the same window.
    """
    command = [sys.executable, "-m", "benchmarks.measure", client, case.workload]
    env = dict(os.environ, **BENCH_ENVIRONMENT, **environment)
    # The client's own directories (torchdata 0.11 for torchdata_s3-nodes) ahead of the environment's.
    path = [str(REPO), *python_path(client, REPO), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(path).rstrip(os.pathsep)
    window_start = access_log.offset() if access_log else 0
    endpoint_cpu_start = cpu_seconds(endpoint_processes)
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
            result = json.loads(line[len("RESULT ") :])
            if access_log is not None:
                served = access_log.since(window_start)
                result["fetched_bytes"], result["requests"] = served.body_bytes, served.requests
            if endpoint_processes:
                result["endpoint_cpu_seconds"] = cpu_seconds(endpoint_processes) - endpoint_cpu_start
            return result
    tail = (completed.stderr or completed.stdout)[-1500:]
    raise MeasurementFailed(
        f"{client} {case.workload} {case.variant} failed (exit {completed.returncode}): {tail}"
    )


def check(client: str, case: Case, result: dict, *, content: bool) -> None:
    """A client that read (or wrote) the wrong bytes is not measured: fail loudly instead.

    Every run must deliver the expected number of items; the verification run (``content=True``, where the
    adapter computes a digest, or what a write workload wrote is read back) must also deliver exactly the
    dataset's content. The ceiling's downloads (curl into /dev/null) have no digest; where the endpoint counts
    bytes, it must have sent the ceiling every byte it claims. Its uploads are read back like any client's.
    The DataLoader ceiling makes its bytes in memory: it must deliver the dataset's byte count.
    """
    writes = WORKLOADS[case.workload].writes
    if result["items"] != case.expected_items:
        raise RuntimeError(
            f"{client} {case.workload}: read {result['items']} items, expected {case.expected_items}"
        )
    contentless = client in CONTENTLESS and not writes
    if content and not contentless and result["digest"] != case.expected_digest:
        raise RuntimeError(f"{client} {case.workload}: content digest differs from the dataset's")
    expected_bytes = sum(case.context.sizes)
    if contentless and client != CEILING and case.context.sizes and result["bytes"] != expected_bytes:
        moved = result["bytes"]
        raise RuntimeError(f"{client} {case.workload}: moved {moved} bytes, expected {expected_bytes}")
    fetched = result.get("fetched_bytes")
    if client == CEILING and not writes and fetched is not None and fetched < result["bytes"]:
        raise RuntimeError(f"{client} {case.workload}: claims {result['bytes']} bytes, was sent {fetched}")


def run_interleaved(
    cases: list[Case],
    clients_for: Callable[[Case], list[str]],
    rounds: int,
    environment: dict[str, str],
    timeout_s: float,
    on_run: Callable[[str, Optional[Run]], None],
    access_log: Optional[AccessLog] = None,
    check_content: bool = True,
    endpoint_processes: Sequence[int] = (),
) -> list[Run]:
    """For each case: one verified run per client, then `rounds` timed rounds of A B C ... C B A ...

    ``check_content=False`` skips the verified runs (for a second profile over the same data and code).
    ``on_run(label, run)`` follows every measurement (``run`` is None for a verification run)."""
    runs: list[Run] = []
    for case in cases:
        clients = clients_for(case)
        title = f"{case.workload} {case.variant}".strip()
        checked_context = {**asdict(case.context), "verify": True}
        if case.context.verify_endpoint_url:  # listing-scale: the same keys, without the page latency
            checked_context["endpoint_url"] = case.context.verify_endpoint_url
        verified = Case(**{**asdict(case), "context": Context(**checked_context)})
        for client in list(clients) if check_content else []:  # correctness first, untimed
            try:
                result = measure(client, verified, environment, timeout_s, access_log, endpoint_processes)
            except (MeasurementFailed, subprocess.TimeoutExpired) as error:
                # A client that cannot do the workload at all (e.g. a stream that cannot seek) is recorded
                # as failed and left out of the rounds. Wrong bytes, below, stop the harness instead.
                failed = Run(client, case.workload, case.variant, 0, 0.0, 0.0, 0, 0, 0, 0, str(error))
                runs.append(failed)
                clients.remove(client)
                on_run(f"{title} {client} (content check)", failed)
                continue
            check(client, case, result, content=True)
            on_run(f"{title} {client} (content check)", None)
        for round_number in range(rounds):
            order = clients if round_number % 2 == 0 else list(reversed(clients))
            for client in order:
                try:
                    result = measure(client, case, environment, timeout_s, access_log, endpoint_processes)
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
                        rss_growth(result),
                        result["rss_peak_bytes"],
                        cpu_seconds=result.get("cpu_seconds"),
                        fetched_bytes=result.get("fetched_bytes"),
                        requests=result.get("requests"),
                        endpoint_cpu_seconds=result.get("endpoint_cpu_seconds"),
                        machine_busy_seconds=result.get("machine_busy_seconds"),
                        machine_available_seconds=result.get("machine_available_seconds"),
                        extra=result.get("extra", {}),
                    )
                except (RuntimeError, subprocess.TimeoutExpired) as error:
                    run = Run(
                        client, case.workload, case.variant, round_number, 0.0, 0.0, 0, 0, 0, 0, str(error)
                    )
                runs.append(run)
                on_run(f"{title} {client} round {round_number + 1}/{rounds}", run)
    return runs
