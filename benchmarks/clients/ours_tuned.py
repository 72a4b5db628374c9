"""A variant of ours beside the headline figure: the same read loops with the connection tuner on
(``S3Config(tune_connections=True)``): the client learns how many of its connections to use at once from the
rate (csrc/connection_tuner.h) instead of using every one the CRT sizes its pool for. What the tuner is worth,
in the same run."""

from __future__ import annotations

from . import ours
from .common import with_options

NAME = "torchdata_s3-tuned"
CONFIGURATION = "the same S3FileLoader and read loops as torchdata_s3, with S3Config(tune_connections=True)"

large = with_options({"tune_connections": True}, ours.large)
small = with_options({"tune_connections": True}, ours.small)
whole = with_options({"tune_connections": True}, ours.whole)
