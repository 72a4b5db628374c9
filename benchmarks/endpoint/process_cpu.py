"""CPU seconds from /proc: the endpoint's own processes (what a small object costs the server, measured beside
what it costs the client), and the whole machine's. On this 2-core machine the endpoint shares the cores with
the client, so a client's rate of small objects is bounded by (2 cores) / (client CPU + endpoint CPU per
object): the figure that says whether a target is above what the machine can serve at all."""

from __future__ import annotations

import os
from collections.abc import Iterable

_TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")


def cpu_seconds(process_ids: Iterable[int]) -> float:
    """User + system CPU seconds of the given live processes (a process that has exited counts 0)."""
    total_ticks = 0
    for pid in process_ids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total_ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))
    return total_ticks / _TICKS_PER_SECOND


def machine_cpu_seconds() -> tuple[float, float]:
    """``(busy, available)`` CPU seconds of all the machine's CPUs since boot (``/proc/stat``): busy is user,
    nice, system, irq and softirq time (the client, the endpoint, the kernel's network work alike); available
    adds idle and iowait. Steal (the hypervisor's) is in neither: no process here could have used it."""
    with open("/proc/stat") as stat:
        user, nice, system, idle, iowait, irq, softirq = (
            int(value) for value in stat.readline().split()[1:8]
        )
    busy = user + nice + system + irq + softirq
    return busy / _TICKS_PER_SECOND, (busy + idle + iowait) / _TICKS_PER_SECOND
