"""A variant of ours beside the headline figure: the same read(1 MiB) loop with every part of a large object
received into a pool buffer and copied into each read()'s result, as before parts were scattered over the
results (see csrc/scattered_results.h): what that saves, measured in the same run."""

from __future__ import annotations

from torchdata_s3 import _core

from . import ours
from .common import Context, Measurement

NAME = "torchdata_s3-unscattered"
CONFIGURATION = "the same S3FileLoader and read(1 MiB) as torchdata_s3, parts never scattered over results"


def _unscattered(workload):  # type: ignore[no-untyped-def]
    def measure(ctx: Context) -> Measurement:
        _core.set_scattered_reads(False)  # this measurement's own process: nothing else sees it
        return workload(ctx)

    return measure


large = _unscattered(ours.large)
small = _unscattered(ours.small)
whole = _unscattered(ours.whole)
