"""A variant of ours beside the headline figure: the same read(1 MiB) loop with every part of a large object
received into a pool buffer and copied into each read()'s result, as before parts were scattered over the
results (see csrc/scattered_results.h): what that saves, measured in the same run."""

from __future__ import annotations

from torchdata_s3 import _core

from . import ours
from .common import after_switch

NAME = "torchdata_s3-unscattered"
CONFIGURATION = "the same S3FileLoader and read(1 MiB) as torchdata_s3, parts never scattered over results"


def _switch() -> None:
    _core.set_scattered_reads(False)


large = after_switch(_switch, ours.large)
small = after_switch(_switch, ours.small)
whole = after_switch(_switch, ours.whole)
