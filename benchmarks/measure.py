"""One measurement, in a process of its own: ``python -m benchmarks.measure CLIENT WORKLOAD < CONTEXT_JSON``.

Prints one JSON line: the adapter's Measurement (with the CPU seconds of its timed section, see
``clients.common.process_cpu_seconds``, and the whole machine's, ``clients.common.MachineTime``) plus memory
(RSS at the start of the timed work and the peak, of this process and of its DataLoader workers). The runner
adds the bytes the endpoint sent while this process ran.

A write workload's measurement writes under a fresh prefix (``benchmarks.writes``); in the check run, what it
wrote is read back for the digest unless the adapter gave one (the checkpoints' loaded tensors); the prefix is
deleted afterwards, also when the adapter failed.
"""

from __future__ import annotations

import json
import resource
import sys

from benchmarks import writes
from benchmarks.clients import load
from benchmarks.clients.common import Context, MachineTime, rss_baseline_bytes
from benchmarks.workloads import WORKLOADS


def current_rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


def peak_rss_bytes() -> int:
    """This process's own RSS high-water mark. Not getrusage's ru_maxrss: Linux carries that across fork and
    exec, so a measurement process started by a large harness would report the harness's peak."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def main() -> None:
    client_name, workload = sys.argv[1], sys.argv[2]
    context_json = sys.stdin.read()  # a listing's keys can be far longer than a command line
    if not hasattr(load(client_name), WORKLOADS[workload].function):
        raise SystemExit(f"{client_name} has no {workload} workload")
    result = run(client_name, workload, Context(**json.loads(context_json)))
    print("RESULT " + json.dumps(result), flush=True)


def run(client_name: str, workload: str, ctx: Context) -> dict:
    """The measurement of `client_name` doing `workload` in this process, as the result dict."""
    function = getattr(load(client_name), WORKLOADS[workload].function)
    baseline = current_rss_bytes()
    if WORKLOADS[workload].writes:
        ctx.prefix = writes.measurement_prefix(workload, client_name)
        try:
            measurement = function(ctx)
            peak = peak_rss_bytes()  # before reading anything back
            if ctx.verify and measurement.digest is None:
                measurement.digest = writes.read_back_digest(ctx)
        finally:
            writes.delete_written(ctx)
    else:
        measurement = function(ctx)
        peak = peak_rss_bytes()
    result = measurement.to_dict()
    if MachineTime.available_seconds > 0:  # (an adapter that times itself without a Stopwatch: unknown)
        result["machine_busy_seconds"] = MachineTime.busy_seconds
        result["machine_available_seconds"] = MachineTime.available_seconds
    # An adapter that built its data in memory first marked where its timed work began (reset_peak_rss).
    result["rss_start_bytes"] = rss_baseline_bytes() or baseline
    result["rss_peak_bytes"] = peak
    if "rss_growth_bytes" in measurement.extra:  # measured by the adapter's own processes (dcp's ranks)
        result["rss_growth_bytes"] = measurement.extra["rss_growth_bytes"]
    result["children_rss_peak_bytes"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return result


if __name__ == "__main__":
    main()
