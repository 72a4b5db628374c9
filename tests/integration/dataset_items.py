"""Picklable helpers for the dataset tests (spawned DataLoader workers import them by name)."""

from __future__ import annotations

import hashlib

from torchdata_s3.reader import S3ObjectStream


def payload(index: int) -> bytes:
    """Object `index`'s bytes: distinct per object, a few hundred bytes to a few kB."""
    seed = hashlib.sha256(str(index).encode()).digest()
    return seed * (8 + index * 5)


def key_and_bytes(stream: S3ObjectStream) -> tuple[str, bytes]:
    """A transform: the object's key and its whole contents."""
    return stream.key, stream.read()


def as_list(batch: list) -> list:
    """A collate_fn that keeps a batch's items as they are."""
    return batch
