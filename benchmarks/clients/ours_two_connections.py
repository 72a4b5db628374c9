"""A variant of ours beside the headline figure: the same read loops with the client capped at two
connections (``S3Config(max_connections=2)``). The CRT sizes its connection pool for a far endpoint (S3 gives
about 0.1 GB/s per connection); a near one gives GB/s per connection, and a stream spread over 8-16 of them
pays more CPU per byte for it (smaller socket reads, more wake-ups, more ACKs to send). What the cap is worth,
in the same run."""

from __future__ import annotations

from . import ours
from .common import with_options

NAME = "torchdata_s3-2_connections"
CONFIGURATION = "the same S3FileLoader and read loops as torchdata_s3, with S3Config(max_connections=2)"

large = with_options({"max_connections": 2}, ours.large)
small = with_options({"max_connections": 2}, ours.small)
whole = with_options({"max_connections": 2}, ours.whole)
