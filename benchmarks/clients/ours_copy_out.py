"""A variant of ours beside the headline figure: the same read(1 MiB) loop with every body byte copied out of
the CRT's channel messages, as upstream aws-c-s3 does (receiving in place turned off; see
cmake/AwsCrtPatches.cmake): what that patch saves, measured in the same run."""

from __future__ import annotations

from torchdata_s3 import _core

from . import ours
from .common import after_switch

NAME = "torchdata_s3-copy_out"
CONFIGURATION = "the same S3FileLoader and read(1 MiB) as torchdata_s3, receiving in place off"


def _switch() -> None:
    _core.set_receive_in_place(False)


large = after_switch(_switch, ours.large)
small = after_switch(_switch, ours.small)
whole = after_switch(_switch, ours.whole)
