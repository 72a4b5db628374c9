"""Streams a reader gives up while their objects are still arriving: what the landing tests do to them."""

from __future__ import annotations

import gc
import io


def give_up(streams: list[tuple[str, io.BufferedIOBase]], how: str) -> None:
    """Closes (``how="closed"``) or just drops (``"dropped"``) every stream, empties the list and collects
    garbage: nothing of this module or the caller's list refers to them afterwards."""
    while streams:
        _url, stream = streams.pop()
        if how == "closed":
            stream.close()
        del stream
    gc.collect()
