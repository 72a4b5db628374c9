"""Progress lines while the harness runs: which measurement, i of N, time elapsed, and its figure."""

from __future__ import annotations

import sys
import time
from typing import Optional, TextIO

from benchmarks.runner import Run


class Progress:
    def __init__(self, total: int, stream: TextIO = sys.stderr) -> None:
        self.total = total
        self.done = 0
        self.stream = stream
        self.started = time.monotonic()

    def elapsed(self) -> str:
        seconds = int(time.monotonic() - self.started)
        return f"{seconds // 60}:{seconds % 60:02d}"

    def note(self, text: str) -> None:
        """A line about a step that is not a measurement (starting an endpoint, generating data)."""
        print(f"[{self.elapsed()}] {text}", file=self.stream, flush=True)

    def measured(self, profile: str, label: str, run: Optional[Run], unit: str) -> None:
        self.done += 1
        if run is None:
            outcome = "content ok"
        elif run.error:
            outcome = "FAILED: " + run.error.strip().splitlines()[-1][:120]
        else:
            figure = run.throughput
            outcome = f"{figure:,.0f} {unit}" if figure >= 100 else f"{figure:.3g} {unit}"
        width = len(str(self.total))
        print(
            f"[{self.done:>{width}}/{self.total} {self.elapsed()}] {profile} {label}: {outcome}",
            file=self.stream,
            flush=True,
        )
