"""A variant of ours beside the headline figure: the same read(1 MiB) loop with each connection's socket read
at most 16 KiB per event-loop tick, as upstream aws-c-io does (ours: 256 KiB, the channel fragment size our
runtime sets; see cmake/AwsCrtPatches.cmake): what reading more per tick saves, measured in the same run."""

from __future__ import annotations

from torchdata_s3 import _core

from . import ours
from .common import after_switch

NAME = "torchdata_s3-16k_reads"
CONFIGURATION = (
    "the same S3FileLoader and read(1 MiB) as torchdata_s3, sockets read 16 KiB per tick (upstream)"
)
UPSTREAM_SOCKET_READ_BYTES = 16 * 1024


def _switch() -> None:
    _core.set_client_socket_read_size(UPSTREAM_SOCKET_READ_BYTES)


large = after_switch(_switch, ours.large)
small = after_switch(_switch, ours.small)
whole = after_switch(_switch, ours.whole)
