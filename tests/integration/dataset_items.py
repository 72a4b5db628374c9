"""Picklable helpers for the dataset tests (spawned DataLoader workers import them by name)."""

from __future__ import annotations

import hashlib

from torchdata_s3.reader import S3ObjectStream


def payload(index: int) -> bytes:
    """Object `index`'s bytes: distinct per object, a few hundred bytes to a few kB."""
    seed = hashlib.sha256(str(index).encode()).digest()
    return seed * (8 + index * 5)


def put_numbered_objects(boto_s3, bucket: str, folder: str, count: int) -> str:  # type: ignore[no-untyped-def]
    """Objects ``folder/000`` ... holding ``payload(index)``; returns the ``s3://bucket/folder/`` prefix."""
    for index in range(count):
        boto_s3.put_object(Bucket=bucket, Key=f"{folder}/{index:03d}", Body=payload(index))
    return f"s3://{bucket}/{folder}/"


def key_and_bytes(stream: S3ObjectStream) -> tuple[str, bytes]:
    """A transform: the object's key and its whole contents."""
    return stream.key, stream.read()


def as_list(batch: list) -> list:
    """A collate_fn that keeps a batch's items as they are."""
    return batch
