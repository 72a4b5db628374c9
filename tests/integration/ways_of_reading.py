"""Ways of reading a whole stream that the landing tests check byte for byte."""

from __future__ import annotations

import gc
import io


def into_a_buffer(stream: io.BufferedIOBase) -> bytes:
    """readinto() a reused buffer smaller than the object, to the end."""
    out, buffer = bytearray(), bytearray(30_000)
    while n := stream.readinto(buffer):
        out += buffer[:n]
    return bytes(out)


def chunks_kept_past_the_stream(stream: io.BufferedIOBase) -> bytes:
    """read_chunk() to the end, the stream closed and collected while the chunks are still held."""
    chunks = list(iter(stream.read_chunk, None))  # type: ignore[attr-defined]
    stream.close()
    gc.collect()  # the stream's own references are gone: only the chunks keep the memory
    return b"".join(bytes(chunk) for chunk in chunks)
