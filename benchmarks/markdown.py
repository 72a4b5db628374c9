"""Renders results documents as Markdown for the results page: ``python -m benchmarks.markdown FILE...``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from benchmarks.clients import (
    DATALOADER_CEILING,
    DATASET_PEERS,
    LINES_FLOOR,
    LOADER_IN_DATALOADER,
    READ_CHUNK,
)
from benchmarks.report import FLOOR_RATIOS, fine_figure, validate, whole_percent


def _value(value: float | None) -> str:
    if value is None:
        return "-"
    # Three significant digits below 100: seconds of the random workload are fractions.
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def render(document: dict[str, Any]) -> str:
    meta = document["meta"]
    shaping = (
        f"{meta['latency_ms']:.0f} ms to first byte, {meta['bandwidth_mbps']:.0f} MB/s per connection"
        if meta["profile"] == "s3like"
        else "no shaping"
    )
    lines = [
        f"### Profile `{meta['profile']}` ({shaping})",
        "",
        f"Measured {meta['date']} on {meta['machine']}, Python {meta['python']}; "
        f"{meta['rounds']} interleaved rounds per client after one untimed run that must reproduce "
        "the dataset's content digest"
        + ("" if meta.get("content_checked", True) else " (that run was on the other profile)")
        + ". "
        "Median (min-max); ratio = client median / torchdata_s3 median. CPU s/GB: user + system seconds of "
        "the client's whole process (all threads, finished child processes) over the timed section, per GB "
        "read, and per item; fetched: body bytes the endpoint sent during the measurement's process (its "
        "access log); endpoint CPU: its processes' user + system seconds in that window, per request; "
        "machine busy % and CPU s/GB: the whole machine's busy time (every process and the kernel, steal "
        "aside, /proc/stat) over the timed section, as a share of what its cores had and per GB read.",
        "",
    ]
    check = meta.get("profile_check") or {}
    if "ttfb_ms" in check:
        lines += [
            f"Endpoint check before measuring: time to first byte {check['ttfb_ms']:.1f} ms, "
            f"one-connection bandwidth {check['bandwidth_mbps']:.0f} MB/s.",
            "",
        ]
    for comparison in document["comparisons"]:
        title = f"{comparison['workload']} {comparison['variant']}".strip()
        # A second figure (epoch 1, a checkpoint's load seconds) gets a column of its own.
        label = comparison.get("secondary_label")
        extra_head, extra_rule = (f" {label} |", " ---: |") if label else ("", "")
        lines += [
            f"**{title}** — {comparison['unit']}",
            "",
            "| client | median | min-max | vs ours | RSS growth MiB | CPU s/GB | CPU ms/item | fetched MiB "
            "| endpoint CPU ms/request | machine busy % | machine CPU s/GB |" + extra_head,
        ]
        lines.append(
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |" + extra_rule
        )
        for client, row in comparison["clients"].items():
            if row["median"] is None:
                errors = row["errors"][0].strip().splitlines() if row["errors"] else ["no result"]
                lines.append(
                    f"| {client} | failed | | | {errors[-1][:120]} | | | | | | |" + (" |" if label else "")
                )
                continue
            ratio = f"{row['ratio_to_ours']:.2f}x" if row["ratio_to_ours"] else "-"
            lines.append(
                f"| {client} | {_value(row['median'])} | {_value(row['min'])}-{_value(row['max'])} | {ratio} "
                f"| {_value(row['rss_growth_mib_median'])} | {_value(row.get('cpu_s_per_gb_median'))} "
                f"| {fine_figure(row.get('cpu_ms_per_item_median'))} "
                f"| {_value(row.get('fetched_mib_median'))} "
                f"| {fine_figure(row.get('endpoint_cpu_ms_per_request_median'))} "
                f"| {whole_percent(row.get('machine_busy_percent_median'))} "
                f"| {_value(row.get('machine_cpu_s_per_gb_median'))} |"
                + (f" {_value(row.get('secondary_median'))} |" if label else "")
            )
        summary = []
        if comparison["ours_vs_best_peer"]:
            better = "" if comparison.get("higher_is_better", True) else " (best peer's seconds / ours)"
            summary.append(f"ours / best peer **{comparison['ours_vs_best_peer']:.2f}x**{better}")
        if comparison.get("ours_secondary_vs_best_peer"):
            ratio = comparison["ours_secondary_vs_best_peer"]
            summary.append(f"{label}: ours / best peer **{ratio:.2f}x**")
        if comparison["ours_vs_ceiling"]:
            summary.append(f"ours / raw-HTTP ceiling **{comparison['ours_vs_ceiling']:.0%}**")
        if comparison.get("ours_cpu_per_gb_vs_lowest_peer"):
            ratio = comparison["ours_cpu_per_gb_vs_lowest_peer"]
            summary.append(f"ours' CPU per GB / lowest peer's **{ratio:.2f}x**")
        for key, floor in FLOOR_RATIOS.items():
            if comparison.get(key):
                summary.append(f"ours' CPU per GB / {floor}'s **{comparison[key]:.2f}x**")
        for client, ratio in (comparison.get("reads_vs_read_chunk") or {}).items():
            summary.append(f"{client} / {READ_CHUNK} **{ratio:.2f}x**")
        for client, ratio in (comparison.get("lines_vs_floor") or {}).items():
            summary.append(f"{client} / {LINES_FLOOR} **{ratio:.2f}x**")
        for variant, ratio in (comparison.get("variants_vs_their_peers") or {}).items():
            summary.append(f"{variant} / {DATASET_PEERS[variant]} **{ratio:.2f}x**")
        for door, ratio in (comparison.get("doors_vs_loader_in_dataloader") or {}).items():
            summary.append(f"{door} / {LOADER_IN_DATALOADER} **{ratio:.2f}x**")
        for client, ratio in (comparison.get("vs_dataloader_ceiling") or {}).items():
            summary.append(f"{client} / {DATALOADER_CEILING} **{ratio:.0%}**")
        lines += ["", "; ".join(summary), ""] if summary else [""]
    return "\n".join(lines)


def main(paths: list[str]) -> None:
    for path in paths:
        document = json.loads(Path(path).read_text())
        validate(document)
        print(render(document))


if __name__ == "__main__":
    main(sys.argv[1:])
