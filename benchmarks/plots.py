"""PNG plots of a results document: one per workload, medians with min-max ranges."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt

from benchmarks.clients import CEILINGS, OURS, OURS_VARIANTS


def plot(document: dict[str, Any], directory: Path) -> list[Path]:
    written = []
    profile = document["meta"].get("profile", "")
    workloads = sorted({c["workload"] for c in document["comparisons"]})
    for workload in workloads:
        comparisons = [c for c in document["comparisons"] if c["workload"] == workload]
        figure, axes = plt.subplots(
            len(comparisons), 1, figsize=(9, 2.2 + 1.9 * len(comparisons)), squeeze=False
        )
        for axis, comparison in zip(axes[:, 0], comparisons):
            clients = [c for c, row in comparison["clients"].items() if row["median"] is not None]
            medians = [comparison["clients"][c]["median"] for c in clients]
            low = [m - comparison["clients"][c]["min"] for c, m in zip(clients, medians)]
            high = [comparison["clients"][c]["max"] - m for c, m in zip(clients, medians)]
            colors = [
                "tab:orange"
                if c == OURS
                else "navajowhite"
                if c in OURS_VARIANTS
                else "tab:gray"
                if c in CEILINGS
                else "tab:blue"
                for c in clients
            ]
            axis.barh(clients, medians, xerr=[low, high], color=colors, capsize=3)
            axis.invert_yaxis()
            lower = "" if comparison.get("higher_is_better", True) else " (lower is better)"
            axis.set_xlabel(comparison["unit"] + lower)
            axis.set_title(
                f"{workload} {comparison['variant']} (profile {profile}; median, min-max)".replace("  ", " ")
            )
            for y, value in enumerate(medians):
                axis.text(
                    value, y, f" {value:,.0f}" if value >= 100 else f" {value:,.2f}", va="center", fontsize=8
                )
        figure.tight_layout()
        path = directory / f"{profile}-{workload}.png"
        figure.savefig(path, dpi=110)
        plt.close(figure)
        written.append(path)
    return written
