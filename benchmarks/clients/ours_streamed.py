"""A variant of ours beside the headline figure: the same read(1 MiB) loop over small objects with every
object streamed (``S3Config(small_object_bytes=0)``), as before small objects were yielded whole once
arrived (torchdata_s3/landed.py): what landing them saves, measured in the same run."""

from __future__ import annotations

from . import ours
from .common import with_options

NAME = "torchdata_s3-streamed"
CONFIGURATION = "the same S3FileLoader and read(1 MiB) as torchdata_s3, with S3Config(small_object_bytes=0)"

small = with_options({"small_object_bytes": 0}, ours.small)
