"""The one-socket floor with the memory of a reader that reads ahead: each body received into a ring of
1 MiB buffers as large as ours' read window, so every byte lands in memory last written a read window ago (out
of the cache), as in any client that receives bytes before its reader asks for them. Beside `socket-floor`
(one reused buffer, always in the cache) it shows what reading ahead costs the kernel's copy alone. A
reference, not a peer; embedded endpoint, plain HTTP only."""

from __future__ import annotations

from torchdata_s3.config import S3Config

from .common import Context, Measurement
from .socket_floor import fetch_into_ring

NAME = "socket-floor-ahead"
READ_WINDOW_BYTES = S3Config().read_window_bytes
CONFIGURATION = (
    f"socket-floor receiving into a ring of 1 MiB buffers, {READ_WINDOW_BYTES >> 20} MiB in all"
    " (ours' read window)"
)


def _fetch(ctx: Context) -> Measurement:
    return fetch_into_ring(ctx, READ_WINDOW_BYTES)


large = _fetch
small = _fetch
whole = _fetch
