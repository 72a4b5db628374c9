"""One measurement, in a process of its own: ``python -m benchmarks.measure CLIENT WORKLOAD < CONTEXT_JSON``.

Prints one JSON line: the adapter's Measurement (with the CPU seconds of its timed section, see
``clients.common.process_cpu_seconds``) plus memory (RSS at the start of the timed work and the peak, of this
process and of its DataLoader workers). The runner adds the bytes the endpoint sent while this process ran.
"""

from __future__ import annotations

import json
import resource
import sys

from benchmarks.clients import load
from benchmarks.clients.common import Context


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
    adapter = load(client_name)
    function = getattr(adapter, workload, None)
    if function is None:
        raise SystemExit(f"{client_name} has no {workload} workload")
    ctx = Context(**json.loads(context_json))
    baseline = current_rss_bytes()
    measurement = function(ctx)
    result = measurement.to_dict()
    result["rss_start_bytes"] = baseline
    result["rss_peak_bytes"] = peak_rss_bytes()
    result["children_rss_peak_bytes"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
