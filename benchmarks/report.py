"""Summaries of the runs: medians and ranges per client, ratios to ours, a terminal table and JSON."""

from __future__ import annotations

import json
import platform
import statistics
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.clients import CEILING, OURS
from benchmarks.runner import Case, Run

SCHEMA_VERSION = 1


def summarize(cases: list[Case], runs: list[Run], meta: dict[str, Any]) -> dict[str, Any]:
    """Builds the results document (the JSON file's content)."""
    comparisons = []
    for case in cases:
        mine = [r for r in runs if r.workload == case.workload and r.variant == case.variant]
        by_client: dict[str, list[Run]] = {}
        for run in mine:
            by_client.setdefault(run.client, []).append(run)
        rows = {}
        for client, client_runs in by_client.items():
            good = [r.throughput for r in client_runs if not r.error]
            rows[client] = {
                "median": statistics.median(good) if good else None,
                "min": min(good) if good else None,
                "max": max(good) if good else None,
                "runs": len(client_runs),
                "failed_runs": sum(1 for r in client_runs if r.error),
                "errors": sorted({r.error[:300] for r in client_runs if r.error}),
                "rss_growth_mib_median": statistics.median(
                    [r.rss_growth_bytes / 2**20 for r in client_runs if not r.error]
                )
                if good
                else None,
            }
        ours = rows.get(OURS, {}).get("median")
        for row in rows.values():
            row["ratio_to_ours"] = (row["median"] / ours) if (ours and row["median"]) else None
        peers = [
            row["median"] for client, row in rows.items() if client not in (OURS, CEILING) and row["median"]
        ]
        comparisons.append(
            {
                "workload": case.workload,
                "variant": case.variant,
                "unit": case.unit,
                "clients": rows,
                "ours_vs_best_peer": (ours / max(peers)) if (ours and peers) else None,
                "ours_vs_ceiling": (ours / rows[CEILING]["median"])
                if (ours and rows.get(CEILING, {}).get("median"))
                else None,
            }
        )
    return {
        "schema_version": SCHEMA_VERSION,
        "meta": {**meta, "python": platform.python_version(), "machine": machine_description()},
        "comparisons": comparisons,
        "runs": [asdict(r) for r in runs],
    }


def machine_description() -> str:
    cores = len(__import__("os").sched_getaffinity(0))
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next(line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
    except (OSError, StopIteration):
        model = platform.processor() or "unknown CPU"
    with open("/proc/meminfo") as meminfo:
        memory_gib = int(meminfo.readline().split()[1]) / 2**20
    return f"{cores} cores ({model}), {memory_gib:.0f} GiB RAM, {platform.system()} {platform.release()}"


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 100 else f"{value:,.2f}"


def table(document: dict[str, Any]) -> str:
    """A plain-text table: one block per comparison, a line per client."""
    lines = []
    for comparison in document["comparisons"]:
        title = f"{comparison['workload']} {comparison['variant']}".strip()
        profile = document["meta"].get("profile", "?") + (
            " over https" if document["meta"].get("https") else ""
        )
        lines.append(f"\n{title} [{comparison['unit']}, profile {profile}]")
        lines.append(f"  {'client':<20}{'median':>12}{'min':>12}{'max':>12}{'vs ours':>10}{'RSS+ MiB':>10}")
        for client, row in comparison["clients"].items():
            ratio = row["ratio_to_ours"]
            failed = f"  ({row['failed_runs']} failed: {row['errors'][0][:80]})" if row["failed_runs"] else ""
            ratio_text = f"{ratio:.2f}x" if ratio else "-"
            lines.append(
                f"  {client:<20}{_number(row['median']):>12}{_number(row['min']):>12}"
                f"{_number(row['max']):>12}{ratio_text:>10}{_number(row['rss_growth_mib_median']):>10}{failed}"
            )
        if comparison["ours_vs_best_peer"]:
            lines.append(f"  ours / best peer: {comparison['ours_vs_best_peer']:.2f}x")
        if comparison["ours_vs_ceiling"]:
            lines.append(f"  ours / raw HTTP ceiling: {comparison['ours_vs_ceiling']:.0%}")
    return "\n".join(lines)


def write_json(document: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(document, indent=2))


def validate(document: dict[str, Any]) -> None:
    """Checks the results document's shape (used by the harness's tests and before plotting)."""
    if document.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"schema_version {document.get('schema_version')!r} != {SCHEMA_VERSION}")
    for key in ("meta", "comparisons", "runs"):
        if key not in document:
            raise ValueError(f"results document lacks {key!r}")
    for comparison in document["comparisons"]:
        for key in ("workload", "variant", "unit", "clients", "ours_vs_best_peer", "ours_vs_ceiling"):
            if key not in comparison:
                raise ValueError(f"comparison lacks {key!r}")
        for client, row in comparison["clients"].items():
            for key in (
                "median",
                "min",
                "max",
                "runs",
                "failed_runs",
                "ratio_to_ours",
                "rss_growth_mib_median",
            ):
                if key not in row:
                    raise ValueError(f"row {client!r} lacks {key!r}")
            if row["median"] is not None and not row["min"] <= row["median"] <= row["max"]:
                raise ValueError(f"row {client!r}: median outside min-max")
