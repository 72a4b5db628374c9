"""The `dcp` workload: ``torch.distributed.checkpoint`` save then load with 2 ranks, gloo on 127.0.0.1.

The measuring process starts the ranks and waits for them. They are forked by a fresh server process that
imported torch once (multiprocessing's "forkserver", torch preloaded): fresh processes, as torchrun's would
be, without two more torch imports per measurement (13 s on this machine under load, outside the clock).
Each rank holds its block of rows of every tensor (``DTensor`` sharded over a 1-D CPU mesh;
``benchmarks.state_dicts``), generated before the clock, and a zeroed target of the same shape to load into.
Rank 0 times ``dcp.save`` and then ``dcp.load`` from a barrier to a barrier (both ranks done). Each rank
measures the CPU of its own process over the same sections (getrusage, every thread) and its own peak RSS
growth after its set-up; the measurement sums the CPU and takes the larger growth. In the check run each
rank digests what it loaded.

An adapter supplies ``dcp_storage_writer(ctx, url)`` and ``dcp_storage_reader(ctx, url)`` (module-level, so
that a spawned rank can import them) and sets ``dcp = dcp_workload(__name__)``.
"""

from __future__ import annotations

import importlib
import multiprocessing
import queue as queues
import time
from dataclasses import asdict
from datetime import timedelta
from typing import Any, Callable

from benchmarks.writes import checkpoint_url

from .common import Context, Measurement, process_cpu_seconds, reset_peak_rss, rss_baseline_bytes

RANKS = 2
PRELOAD = ["torch", "torch.distributed.checkpoint", "torch.distributed.tensor", __name__]
RANK_TIMEOUT_S = 900.0  # a rank that neither reports nor fails within it is stopped
# What torch's and s3torchconnector's writers call thread_count (both default to 1): objects each rank writes
# at once. Peers get ours' default, 2.
THREAD_COUNT = 2


def _peak_rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def _rank(rank: int, port: int, adapter_name: str, context: dict, results: Any) -> None:
    """One rank's whole life; reports a dict on `results` (or an ``{"error": ...}`` one)."""
    try:
        results.put(_run_rank(rank, port, adapter_name, Context(**context)))
    except BaseException as error:  # reported to the measuring process, which raises it
        import traceback

        results.put({"rank": rank, "error": f"{error!r}\n{traceback.format_exc()}"})
        raise


def _run_rank(rank: int, port: int, adapter_name: str, ctx: Context) -> dict:
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as checkpoint
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard

    from benchmarks.state_dicts import make_tensor, state_digest

    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=RANKS,
        timeout=timedelta(seconds=RANK_TIMEOUT_S),
    )
    try:
        mesh = init_device_mesh("cpu", (RANKS,))
        state, target = {}, {}
        for index, (name, size) in enumerate(zip(ctx.keys, ctx.sizes)):
            block = make_tensor(index, size, rank, RANKS)
            state[name] = DTensor.from_local(block, mesh, [Shard(0)], run_check=False)
            target[name] = DTensor.from_local(torch.zeros_like(block), mesh, [Shard(0)], run_check=False)
        adapter = importlib.import_module(adapter_name)
        url = checkpoint_url(ctx)
        writer = adapter.dcp_storage_writer(ctx, url)
        reader = adapter.dcp_storage_reader(ctx, url)
        reset_peak_rss()

        def timed(call: Callable[[], Any]) -> tuple[float, float]:
            dist.barrier()
            cpu, started = process_cpu_seconds(), time.perf_counter()
            call()
            dist.barrier()
            return time.perf_counter() - started, process_cpu_seconds() - cpu

        save_seconds, save_cpu = timed(lambda: checkpoint.save(state, storage_writer=writer))
        load_seconds, load_cpu = timed(lambda: checkpoint.load(target, storage_reader=reader))
        growth = _peak_rss_bytes() - (rss_baseline_bytes() or 0)
        return {
            "rank": rank,
            "save_seconds": save_seconds,
            "load_seconds": load_seconds,
            "cpu_seconds": save_cpu + load_cpu,
            "rss_growth_bytes": growth,
            "items": len(target),
            "digest": state_digest(target) if ctx.verify else None,
        }
    finally:
        dist.destroy_process_group()


def _free_loopback_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def measure_dcp(ctx: Context, adapter_name: str) -> Measurement:
    """Spawns the ranks, collects their reports, and returns rank 0's timings with every rank's CPU."""
    spawn = multiprocessing.get_context("forkserver")
    spawn.set_forkserver_preload(PRELOAD)
    results = spawn.Queue()
    port = _free_loopback_port()
    ranks = [
        spawn.Process(target=_rank, args=(rank, port, adapter_name, asdict(ctx), results), daemon=True)
        for rank in range(RANKS)
    ]
    for process in ranks:
        process.start()
    reports: dict[int, dict] = {}
    deadline = time.monotonic() + RANK_TIMEOUT_S
    failed = True
    try:
        while len(reports) < RANKS:
            try:
                report = results.get(timeout=1.0)
            except queues.Empty:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the dcp ranks did not finish within {RANK_TIMEOUT_S} s") from None
                dead = [p.exitcode for p in ranks if p.exitcode not in (None, 0)]
                if dead and results.empty():
                    raise RuntimeError(f"a dcp rank exited with {dead[0]} without reporting") from None
                continue
            if "error" in report:
                raise RuntimeError(f"dcp rank {report['rank']} failed: {report['error']}")
            reports[report["rank"]] = report
        failed = False
    finally:
        for process in ranks:
            # After a failure the other rank may wait in a collective until gloo's timeout: stop it now.
            process.join(timeout=0 if failed else 30)
            if process.is_alive():
                process.kill()
                process.join()
    first = reports[0]
    digests = [r["digest"] for r in reports.values()]
    return Measurement(
        first["items"],
        2 * sum(ctx.sizes),
        first["save_seconds"] + first["load_seconds"],
        (sum(digests) % (1 << 64)) if ctx.verify else None,
        sum(r["cpu_seconds"] for r in reports.values()),
        extra={
            "save_seconds": first["save_seconds"],
            "load_seconds": first["load_seconds"],
            "rss_growth_bytes": max(r["rss_growth_bytes"] for r in reports.values()),
            "ranks": RANKS,
        },
    )


def dcp_workload(adapter_name: str) -> Callable[[Context], Measurement]:
    """The adapter's ``dcp`` function, for the module named `adapter_name`."""

    def dcp(ctx: Context) -> Measurement:
        return measure_dcp(ctx, adapter_name)

    return dcp
