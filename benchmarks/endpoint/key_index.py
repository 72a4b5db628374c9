"""The sorted key index of one bucket directory, and the object metadata S3 listings report.

A bucket is the directory ``<root>/<bucket>``; every regular file below it is an object whose key is its
path relative to that directory with '/' separators. An index is built once (on first use) by walking the
directory; objects written or deleted through the endpoint later are recorded in it one key at a time
(:meth:`KeyIndex.record`, :meth:`KeyIndex.forget`), so a big static dataset is never walked again.
"""

from __future__ import annotations

import bisect
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


def nginx_etag(mtime_s: int, size: int) -> str:
    """The ETag nginx sends for a static file: ``"<mtime seconds hex>-<size hex>"``, quotes included.

    The listing must report exactly what a GET returns, or clients that compare them (If-Match on ranged
    reads of one object) would see every object as changed.
    """
    return f'"{mtime_s:x}-{size:x}"'


def s3_timestamp(mtime_s: int) -> str:
    """``LastModified`` as S3 writes it, e.g. ``2023-11-27T14:05:06.000Z`` (UTC, millisecond precision)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(mtime_s))


@dataclass(frozen=True)
class ObjectInfo:
    """One listed object: its key, size in bytes and modification time in whole seconds."""

    key: str
    size: int
    mtime_s: int

    @property
    def etag(self) -> str:
        return nginx_etag(self.mtime_s, self.size)


class KeyIndex:
    """The keys of one bucket directory in S3 order, with their sizes and modification times.

    S3 orders keys by their UTF-8 bytes. UTF-8 preserves code point order, so Python's ``str`` ordering is
    the same order, and ``bisect`` on the sorted key list finds any listing position in O(log n).
    """

    def __init__(self, bucket_dir: Path) -> None:
        found = sorted(_walk_files(bucket_dir))
        # Parallel lists rather than one tuple per key: a third of the memory for large datasets.
        self.keys: list[str] = [key for key, _, _ in found]
        self._sizes: list[int] = [size for _, size, _ in found]
        self._mtimes_s: list[int] = [mtime_s for _, _, mtime_s in found]

    def __len__(self) -> int:
        return len(self.keys)

    def first_at_or_after(self, marker: str) -> int:
        """The position of the first key >= ``marker`` (``len(self)`` when there is none)."""
        return bisect.bisect_left(self.keys, marker)

    def object_at(self, position: int) -> ObjectInfo:
        return ObjectInfo(self.keys[position], self._sizes[position], self._mtimes_s[position])

    def record(self, key: str, size: int, mtime_s: int) -> None:
        """Add ``key``, or update it if present: an object was written. O(n) list insertion (a memmove),
        well under a millisecond for a million keys. Not thread-safe: callers serialise index access."""
        position = self.first_at_or_after(key)
        if position < len(self.keys) and self.keys[position] == key:
            self._sizes[position], self._mtimes_s[position] = size, mtime_s
            return
        self.keys.insert(position, key)
        self._sizes.insert(position, size)
        self._mtimes_s.insert(position, mtime_s)

    def forget(self, key: str) -> None:
        """Remove ``key`` if present: an object was deleted. Not thread-safe, like :meth:`record`."""
        position = self.first_at_or_after(key)
        if position < len(self.keys) and self.keys[position] == key:
            del self.keys[position], self._sizes[position], self._mtimes_s[position]


def _walk_files(directory: Path, key_prefix: str = "") -> Iterator[tuple[str, int, int]]:
    """(key, size, mtime seconds) of every regular file below ``directory``, in no particular order.

    Symbolic links to files are followed (nginx serves them); links to directories are not, so a link
    cycle cannot make the walk endless.
    """
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                yield from _walk_files(Path(entry.path), f"{key_prefix}{entry.name}/")
            elif entry.is_file():
                status = entry.stat()
                # nginx's ETag uses the whole seconds of the modification time, so the listing does too.
                yield f"{key_prefix}{entry.name}", status.st_size, int(status.st_mtime)
