"""The listing-scale workload (issue 21): each client lists a prefix of 10^6 (optionally 10^7) generated keys
on :mod:`benchmarks.endpoint.generated_server`, 100 ms per page, as its users iterate it.

Two endpoints serve the same keys: the timed one with the page latency, and a twin without it where each
client's untimed check run lists every key (its count and order digest must match the key space's). Every
timed run must list the expected number of keys, from the expected first to the expected last. Rounds are
interleaved (A B C ... C B A), each measurement in a fresh process
(:func:`benchmarks.runner.run_interleaved`).

Before the rounds, the timed endpoint's capacity is measured on its twin: pages per second with 16
connections asking at once, and its CPU milliseconds per page (it shares the machine's cores with the client
under test).
"""

from __future__ import annotations

import argparse
import datetime
import http.client
import random
import statistics
import threading
import time
import zlib
from pathlib import Path
from typing import Any

from benchmarks.clients.common import Context
from benchmarks.endpoint.access_log import AccessLog
from benchmarks.endpoint.generated_keys import TOP_FOLDERS, KeySpace, key_space
from benchmarks.endpoint.generated_server import GeneratedEndpoint
from benchmarks.progress import Progress
from benchmarks.report import summarize, table, validate, write_json
from benchmarks.runner import Case, Run, run_interleaved

WORKLOAD = "listing-scale"
TEN_MILLION = 10_000_000
CAPACITY_SECONDS = 3.0
CAPACITY_CONNECTIONS = 16


def expected_listing(space: KeySpace, prefix: str) -> tuple[int, int, str, str]:
    """(count, ordered digest, first key, last key) of the keys under ``prefix``, computed 10^4 at a time."""
    start = space.first_at_or_after(prefix)
    stop = space.first_at_or_after(prefix + "\U0010ffff")  # the shapes' prefixes end in "/": no key > this
    crc = 0
    for page in range(start, stop, 10_000):
        for key in space.keys(page, min(stop, page + 10_000)):
            crc = zlib.crc32(key.encode("utf-8", "surrogatepass") + b"\n", crc)
    return stop - start, crc, space.key(start), space.key(stop - 1)


def capacity(endpoint: GeneratedEndpoint, shape: str, keys: int) -> dict[str, float]:
    """Full pages per second the endpoint served to ``CAPACITY_CONNECTIONS`` keep-alive connections asking
    back to back (from random places) for ``CAPACITY_SECONDS``, and its CPU ms per page meanwhile."""
    space = key_space(shape, keys)
    port = int(endpoint.endpoint_url.rsplit(":", 1)[1])
    deadline = time.monotonic() + CAPACITY_SECONDS
    served = [0] * CAPACITY_CONNECTIONS

    def ask(slot: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        chooser = random.Random(slot)
        while time.monotonic() < deadline:
            after = space.key(chooser.randrange(max(1, keys - 1000)))
            connection.request("GET", f"/{shape}?list-type=2&start-after={after}")
            response = connection.getresponse()
            response.read()
            served[slot] += response.status == 200
        connection.close()

    cpu_before, started = endpoint.cpu_seconds(), time.monotonic()
    threads = [threading.Thread(target=ask, args=(slot,)) for slot in range(CAPACITY_CONNECTIONS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds, cpu = time.monotonic() - started, endpoint.cpu_seconds() - cpu_before
    pages = sum(served)
    return {"pages_per_s": pages / seconds, "server_cpu_ms_per_page": 1000 * cpu / max(1, pages)}


def run(args: argparse.Namespace, clients: list[str], progress: Progress) -> dict[str, Any]:
    """Every client on every shape and key count; returns the results document (also written to JSON)."""
    counts = [args.listing_keys] + ([TEN_MILLION] if args.listing_ten_million else [])
    shapes = tuple(args.listing_shapes.split(","))
    cases: list[Case] = []
    runs: list[Run] = []
    capacities: dict[str, Any] = {}
    for keys in counts:
        timed = GeneratedEndpoint(keys, latency_ms=args.listing_page_ms, shapes=shapes)
        twin = GeneratedEndpoint(keys, latency_ms=0, shapes=shapes)
        try:
            timed.start()
            twin.start()
            for shape in shapes:
                progress.note(f"{WORKLOAD}: {keys:,} {shape} keys: measuring the endpoint's capacity")
                capacities[f"{shape} {keys:,}"] = figures = capacity(twin, shape, keys)
                progress.note(
                    f"{WORKLOAD}: endpoint serves {figures['pages_per_s']:.0f} pages/s "
                    f"({figures['server_cpu_ms_per_page']:.2f} CPU ms per page)"
                )
            for shape in shapes:
                space = key_space(shape, keys)
                prefix = TOP_FOLDERS[shape]
                count, digest, first, last = expected_listing(space, prefix)
                context = Context(
                    endpoint_url=timed.endpoint_url,
                    bucket=shape,
                    prefix=prefix,
                    keys=[],
                    verify_endpoint_url=twin.endpoint_url,
                    expected_first_key=first,
                    expected_last_key=last,
                )
                variant = f"{shape}, {keys:,} keys, {args.listing_page_ms:g} ms/page"
                case = Case(WORKLOAD, variant, context, count, digest, "keys/s")
                # A sequential client needs a page latency per 1,000 keys, plus its own parsing.
                timeout = max(args.timeout_s, keys / 1000 * (args.listing_page_ms / 1000 + 0.5) * 2)
                cases.append(case)
                runs += run_interleaved(
                    [case],
                    lambda _case: list(clients),
                    args.rounds,
                    {},
                    timeout,
                    lambda label, run: progress.measured("generated", label, run, "keys/s"),
                    AccessLog(timed.access_log),
                )
        finally:
            timed.stop()
            twin.stop()
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "profile": f"generated keys, {args.listing_page_ms:g} ms per page",
        "page_latency_ms": args.listing_page_ms,
        "rounds": args.rounds,
        "content_checked": True,
        "endpoint_capacity": capacities,
    }
    document = summarize(cases, runs, meta)
    validate(document)
    return document


def first_key_table(document: dict[str, Any]) -> str:
    """Seconds to list, time to the first key, CPU seconds and requests: medians per client and case."""
    lines = []
    for comparison in document["comparisons"]:
        lines.append(f"\n{comparison['workload']} {comparison['variant']}")
        lines.append(
            f"  {'client':<20}{'seconds':>10}{'first key s':>13}{'CPU s':>8}{'RSS+ MiB':>10}{'pages':>8}"
        )
        for client in comparison["clients"]:
            mine = [
                r
                for r in document["runs"]
                if r["client"] == client
                and r["variant"] == comparison["variant"]
                and not r["error"]
                and r["seconds"]
            ]
            if not mine:
                lines.append(f"  {client:<20}{'failed':>10}")
                continue

            median = statistics.median
            seconds = median([r["seconds"] for r in mine])
            first = median([r["extra"].get("first_key_seconds") or 0.0 for r in mine])
            cpu = median([r["cpu_seconds"] or 0.0 for r in mine])
            rss = median([r["rss_growth_bytes"] / 2**20 for r in mine])
            pages = median([r["requests"] or 0 for r in mine])
            lines.append(f"  {client:<20}{seconds:>10.2f}{first:>13.3f}{cpu:>8.2f}{rss:>10.0f}{pages:>8.0f}")
    for name, figures in document["meta"].get("endpoint_capacity", {}).items():
        lines.append(
            f"  endpoint capacity, {name}: {figures['pages_per_s']:.0f} pages/s, "
            f"{figures['server_cpu_ms_per_page']:.2f} CPU ms per page"
        )
    return "\n".join(lines)


def run_and_report(args: argparse.Namespace, clients: list[str], progress: Progress) -> Path:
    document = run(args, clients, progress)
    stamp = document["meta"]["date"][:19].replace(":", "")
    path = args.output / f"results-{WORKLOAD}-{stamp}.json"
    args.output.mkdir(parents=True, exist_ok=True)
    write_json(document, path)
    print(table(document))
    print(first_key_table(document))
    print(f"\nwrote {path}")
    return path


def measurements(args: argparse.Namespace, clients: list[str]) -> int:
    counts = 1 + int(args.listing_ten_million)
    return counts * len(args.listing_shapes.split(",")) * len(clients) * (args.rounds + 1)
