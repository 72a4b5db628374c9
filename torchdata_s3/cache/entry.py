"""One cache entry's format: its name, its footer, and the checks made when it is opened and read.

An entry is an object's bytes, then a footer: JSON naming the bucket, key, ETag and size with the CRC-32 of
each block of ``BLOCK_BYTES``, then the JSON's length and a magic (the entry's last 12 bytes). An entry is
trusted only for that version and only as far as its bytes add up (see :mod:`torchdata_s3.cache.store`
for where entries live).
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from typing import Any

try:
    # CRC-32 with SIMD (ISA-L): the same values as zlib.crc32, at 4-12x its speed on the development machine.
    # Every hit checks every byte of its entry once, so this is most of what a hit costs beyond the read.
    from isal.isal_zlib import crc32
except ImportError:  # a platform without isal's wheel: the same checksums, computed more slowly
    from zlib import crc32

__all__ = ["BLOCK_BYTES", "CacheEntry", "CorruptEntry", "checked_entry", "entry_footer", "entry_name"]

_MAGIC = b"TDS3CAC1"
_TAIL = struct.Struct("<I8s")  # footer JSON length, magic: the entry's last 12 bytes
# Each block of an entry has its own CRC-32, checked when the block is read: a reader gets every byte after
# its block was checked, and reads each byte from disk once (a whole-entry checksum would need a pass of
# its own before the first byte). 1 MiB: the read size of a sequential reader, so its reads go straight
# into its own buffer; a 1 GiB entry's footer holds 1,024 checksums (about 11 kB).
BLOCK_BYTES = 1024 * 1024
# The footer is read with one pread of the entry's last this many bytes (more only for a larger footer): a
# small object's footer is about 200 bytes, a 1 GiB object's about 11 kB.
_TAIL_READ_BYTES = 4 * 1024


def entry_name(bucket: str, key: str) -> str:
    return hashlib.blake2b(f"{bucket}\0{key}".encode(), digest_size=16).hexdigest()


class CorruptEntry(Exception):
    """An entry whose footer or bytes do not add up (truncated, flipped, foreign)."""


class CacheEntry:
    """An entry whose footer and size were checked, open: its descriptor keeps the bytes readable even if
    the entry is evicted. Its bytes are checked block by block as they are read (:meth:`check_blocks`).
    (A plain class with slots: one is made per hit.)"""

    __slots__ = ("block_bytes", "block_crcs", "bucket", "etag", "fd", "inode", "key", "size", "used_at")

    def __init__(
        self,
        fd: int,
        bucket: str,
        key: str,
        etag: str,
        size: int,
        block_bytes: int,
        block_crcs: list[int],
        used_at: float,  # the entry's mtime when opened: its last use
        inode: int,
    ) -> None:
        self.fd, self.bucket, self.key, self.etag, self.size = fd, bucket, key, etag, size
        self.block_bytes, self.block_crcs, self.used_at, self.inode = block_bytes, block_crcs, used_at, inode

    def check_blocks(self, first_block: int, data: memoryview) -> None:
        """Checks ``data``, the bytes of whole blocks from ``first_block`` on (the entry's last block may be
        short). Raises CorruptEntry if any block's CRC-32 differs."""
        step = self.block_bytes
        if len(data) <= step:  # one block: a small object's whole entry
            if crc32(data) != self.block_crcs[first_block]:
                raise CorruptEntry(f"block {first_block} does not match its checksum")
            return
        for offset in range(0, len(data), step):
            if crc32(data[offset : offset + step]) != self.block_crcs[first_block + offset // step]:
                raise CorruptEntry(f"block {first_block + offset // step} does not match its checksum")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def entry_footer(bucket: str, key: str, etag: str, size: int, block_crcs: list[int]) -> bytes:
    """What follows an entry's ``size`` bytes: the footer JSON, its length and the magic."""
    footer = json.dumps(
        {
            "bucket": bucket,
            "key": key,
            "etag": etag,
            "size": size,
            "block_bytes": BLOCK_BYTES,
            "block_crc32": block_crcs,
        }
    ).encode()
    return footer + _TAIL.pack(len(footer), _MAGIC)


# json's own scanner without json.loads' whitespace regexes around it: a footer has none (json.dumps), and
# the footer's parse is a third of what opening a small entry costs in Python.
_SCAN_JSON = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # set by __init__; typeshed omits it


def parse_footer(raw: bytes) -> Any:
    """The footer's JSON value (any JSON type: the caller checks what it holds). Raises ValueError if
    ``raw`` is not exactly one JSON value."""
    text = raw.decode()
    try:
        value, end = _SCAN_JSON(text, 0)
    except StopIteration:  # the scanner's way of saying "no value here"
        raise ValueError("not JSON") from None
    if end != len(text):
        raise ValueError("bytes after the JSON value")
    return value


def checked_entry(fd: int, bucket: str, key: str) -> CacheEntry:
    """Reads and checks an entry's footer against its size. Raises CorruptEntry if they do not add up."""
    info = os.fstat(fd)
    total = info.st_size
    if total < _TAIL.size:
        raise CorruptEntry("shorter than a footer")
    tail_read = min(total, _TAIL_READ_BYTES)
    tail = os.pread(fd, tail_read, total - tail_read)
    footer_length, magic = _TAIL.unpack(tail[-_TAIL.size :])
    if magic != _MAGIC or footer_length > total - _TAIL.size:
        raise CorruptEntry("no footer")
    size = total - _TAIL.size - footer_length
    if footer_length + _TAIL.size <= tail_read:
        raw_footer = tail[tail_read - _TAIL.size - footer_length : tail_read - _TAIL.size]
    else:
        raw_footer = os.pread(fd, footer_length, size)
    try:
        footer = parse_footer(raw_footer)
        etag, block_bytes = str(footer["etag"]), int(footer["block_bytes"])
        block_crcs = [int(crc) for crc in footer["block_crc32"]]
        ok = footer["bucket"] == bucket and footer["key"] == key and footer["size"] == size
    except (ValueError, KeyError, TypeError) as error:  # also a footer of another format
        raise CorruptEntry("unreadable footer") from error
    if not ok:
        raise CorruptEntry("footer of another object or size")
    if block_bytes <= 0 or len(block_crcs) != -(-size // block_bytes):
        raise CorruptEntry("footer with the wrong number of block checksums")
    return CacheEntry(fd, bucket, key, etag, size, block_bytes, block_crcs, info.st_mtime, info.st_ino)
