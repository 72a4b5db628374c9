"""Decoding request bodies sent with ``Content-Encoding: aws-chunked`` (SigV4 streaming uploads).

Such a body is the object's bytes framed in chunks, optionally followed by trailing headers (the flexible
checksums botocore >= 1.36 and the CRT send)::

    <hex size>[;chunk-signature=<sig>]\\r\\n<size bytes>\\r\\n ... 0[;chunk-signature=<sig>]\\r\\n
    [<name>:<value>\\r\\n ...]\\r\\n

Stored as is, the framing would end up inside the object; :func:`decode_aws_chunked` writes only the bytes.
Chunk signatures are ignored (the endpoint ignores auth). A ``x-amz-checksum-crc32`` trailer is verified
(zlib's CRC-32 is S3's CRC32); other checksum algorithms are not computed here and pass unverified.
"""

from __future__ import annotations

import base64
import zlib
from typing import BinaryIO, Optional

_MAX_CHUNK_HEADER_BYTES = 4096  # '<hex>;chunk-signature=<64 hex>' is under 100 bytes
_COPY_BYTES = 1024 * 1024


class MalformedAwsChunked(ValueError):
    """The body is not valid aws-chunked framing, its length or its CRC32 trailer is wrong."""


def is_aws_chunked(content_encoding: Optional[str], content_sha256: Optional[str]) -> bool:
    """Whether a request body is aws-chunked: said by ``Content-Encoding`` (a list; it may have other
    codings too) or by ``x-amz-content-sha256: STREAMING-...``."""
    codings = [coding.strip().lower() for coding in (content_encoding or "").split(",")]
    return "aws-chunked" in codings or (content_sha256 or "").upper().startswith("STREAMING-")


def decode_aws_chunked(source: BinaryIO, target: BinaryIO, decoded_length: Optional[int]) -> dict[str, str]:
    """Copy the payload of the aws-chunked body ``source`` to ``target``; return the trailing headers
    (lower-case names). Raises MalformedAwsChunked on bad framing, on a total other than ``decoded_length``
    (the request's ``x-amz-decoded-content-length``, if it had one), or on a CRC32 trailer that does not
    match the bytes."""
    crc32 = 0
    total = 0
    buffer = bytearray(_COPY_BYTES)
    while True:
        size = _chunk_size(source.readline(_MAX_CHUNK_HEADER_BYTES))
        if size == 0:
            break
        remaining = size
        while remaining:
            view = memoryview(buffer)[: min(remaining, _COPY_BYTES)]
            count = source.readinto(view)
            if not count:
                raise MalformedAwsChunked(
                    f"the body ends inside a chunk ({remaining} of {size} bytes missing)"
                )
            target.write(view[:count])
            crc32 = zlib.crc32(view[:count], crc32)
            remaining -= count
        total += size
        if source.read(2) != b"\r\n":
            raise MalformedAwsChunked("a chunk's data is not followed by CRLF")
    trailers = _trailers(source)
    if decoded_length is not None and total != decoded_length:
        raise MalformedAwsChunked(
            f"decoded {total} bytes, x-amz-decoded-content-length says {decoded_length}"
        )
    sent_crc32 = trailers.get("x-amz-checksum-crc32")
    if sent_crc32 is not None:
        computed = base64.b64encode(crc32.to_bytes(4, "big")).decode("ascii")
        if computed != sent_crc32:
            raise MalformedAwsChunked(f"x-amz-checksum-crc32 trailer {sent_crc32} != {computed} of the bytes")
    return trailers


def _chunk_size(line: bytes) -> int:
    if not line.endswith(b"\r\n"):
        raise MalformedAwsChunked(f"chunk header {line[:80]!r} is not a CRLF-terminated line")
    size_text = line[:-2].split(b";", 1)[0].strip()
    try:
        size = int(size_text, 16)
    except ValueError:
        raise MalformedAwsChunked(f"chunk size {size_text[:40]!r} is not hexadecimal") from None
    if size < 0:
        raise MalformedAwsChunked(f"negative chunk size {size_text!r}")
    return size


def _trailers(source: BinaryIO) -> dict[str, str]:
    """The trailing header lines after the last (empty) chunk, up to the empty line that ends the body."""
    trailers: dict[str, str] = {}
    for _ in range(100):  # a handful in practice; bounded so a bad body cannot loop long
        line = source.readline(_MAX_CHUNK_HEADER_BYTES)
        if line in (b"\r\n", b""):  # some senders end the body right after the last trailer's CRLF
            return trailers
        name, separator, value = line.decode("latin-1").rstrip("\r\n").partition(":")
        if not separator:
            raise MalformedAwsChunked(f"trailer line {line[:80]!r} has no ':'")
        trailers[name.strip().lower()] = value.strip()
    raise MalformedAwsChunked("more than 100 trailer lines")
