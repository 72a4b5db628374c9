"""The `checkpoint` workload's timed sections, shared by every adapter: a state dict of float32 tensors
(``benchmarks.state_dicts``, generated before the clock) saved, then loaded back, each timed on its own.

The figure is the save's seconds; the load's are beside it. CPU seconds cover both; bytes are the state
dict's size twice (saved and loaded), so CPU per GB is per GB moved. In the check run the loaded tensors'
digest must equal the generated ones' (a load that returns other values, or fewer tensors, fails).
"""

from __future__ import annotations

from typing import Any, Callable

from benchmarks.state_dicts import state_dict, state_digest
from benchmarks.writes import checkpoint_url

from .common import Context, Measurement, Stopwatch, reset_peak_rss


def time_checkpoint(
    ctx: Context, save: Callable[[dict, str], None], load: Callable[[str], dict[str, Any]]
) -> Measurement:
    """Times ``save(state, url)`` and then ``load(url)`` (which returns the loaded state dict)."""
    state = state_dict(ctx.keys, ctx.sizes)
    url = checkpoint_url(ctx)
    reset_peak_rss()
    with Stopwatch() as saving:
        save(state, url)
    with Stopwatch() as loading:
        loaded = load(url)
    if sorted(loaded) != sorted(ctx.keys):
        raise RuntimeError(f"loaded tensors {sorted(loaded)[:4]}..., saved {sorted(ctx.keys)[:4]}...")
    digest = state_digest(loaded) if ctx.verify else None
    total = sum(ctx.sizes)
    return Measurement(
        len(loaded),
        2 * total,
        saving.seconds + loading.seconds,
        digest,
        saving.cpu_seconds + loading.cpu_seconds,
        extra={"save_seconds": saving.seconds, "load_seconds": loading.seconds},
    )
