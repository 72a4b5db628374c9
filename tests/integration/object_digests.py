"""Helpers that DataLoader workers run (importable by name, so spawn and forkserver workers find them)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from torch.utils.data import get_worker_info


def digest_object(item: tuple) -> tuple[str, str, int, int]:
    """``(url, sha256 of the whole object, pid, DataLoader worker id)`` for one ``(url, stream)``."""
    url, stream = item
    try:
        digest = hashlib.sha256(stream.read()).hexdigest()
    finally:
        stream.close()
    info = get_worker_info()
    return url, digest, os.getpid(), info.id if info is not None else -1


def record_worker_pid(directory: str, worker_id: int) -> None:
    """A worker_init_fn: leaves a file named after the worker's pid, so the parent can check it exited."""
    Path(directory, str(os.getpid())).write_text(str(worker_id))
