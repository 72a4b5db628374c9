"""The key indexes of all buckets under a data root, built lazily and kept current by the endpoint's writes.

A listing takes its bucket's lock while it reads the index (building it on first use); a write takes the same
lock while it renames its file into place and records the key, so a listing never sees half of a change and a
walk building the index cannot miss or double-count a key being written.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Optional

from benchmarks.endpoint.key_index import KeyIndex

UPLOADS_DIRECTORY = ".uploads"
"""``<data_root>/.uploads``: request bodies being received and multipart uploads in progress. Bucket names
cannot start with '.', so it is never a bucket; the endpoint hides it from listings and GETs."""


class _BucketIndex:
    def __init__(self, bucket_dir: Path) -> None:
        self.bucket_dir = bucket_dir
        self.lock = threading.Lock()
        self.index: Optional[KeyIndex] = None


class BucketIndexes:
    """The buckets (directories) directly under ``root`` and their key indexes."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._buckets: dict[str, _BucketIndex] = {}
        self._buckets_lock = threading.Lock()

    def bucket_dir(self, bucket: str) -> Optional[Path]:
        """The directory of ``bucket``, or None when there is no such bucket (or the name is not one)."""
        if bucket in (".", "..") or bucket.startswith(".") or "\0" in bucket or "/" in bucket:
            return None
        directory = self.root / bucket
        return directory if directory.is_dir() else None

    @contextlib.contextmanager
    def reading(self, bucket: str) -> Iterator[Optional[KeyIndex]]:
        """Hold ``bucket``'s lock and yield its index (built now on first use), or None if no such bucket."""
        entry = self._entry(bucket)
        if entry is None:
            yield None
            return
        with entry.lock:
            if entry.index is None:
                entry.index = KeyIndex(entry.bucket_dir)
            yield entry.index

    @contextlib.contextmanager
    def changing(self, bucket: str) -> Iterator[Optional[KeyIndex]]:
        """Hold ``bucket``'s lock and yield its index if one was built (None if not: a later build walks the
        directory and finds the change there). Raises FileNotFoundError if there is no such bucket."""
        entry = self._entry(bucket)
        if entry is None:
            raise FileNotFoundError(bucket)
        with entry.lock:
            yield entry.index

    def _entry(self, bucket: str) -> Optional[_BucketIndex]:
        directory = self.bucket_dir(bucket)
        if directory is None:
            return None
        with self._buckets_lock:
            return self._buckets.setdefault(bucket, _BucketIndex(directory))
