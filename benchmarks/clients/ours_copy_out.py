"""A variant of ours beside the headline figure: the same read(1 MiB) loop with every body byte copied out of
the CRT's channel messages, as upstream aws-c-s3 does (receiving in place turned off; see
cmake/AwsCrtPatches.cmake): what that patch saves, measured in the same run."""

from __future__ import annotations

from torchdata_s3 import _core

from . import ours
from .common import Context, Measurement

NAME = "torchdata_s3-copy_out"
CONFIGURATION = "the same S3FileLoader and read(1 MiB) as torchdata_s3, receiving in place off"


def _copying(workload):  # type: ignore[no-untyped-def]
    def measure(ctx: Context) -> Measurement:
        _core.set_receive_in_place(False)  # this measurement's own process: nothing else sees it
        return workload(ctx)

    return measure


large = _copying(ours.large)
small = _copying(ours.small)
whole = _copying(ours.whole)
