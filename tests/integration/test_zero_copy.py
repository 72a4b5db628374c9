"""Parts handed to Python without copying: the bytes stay valid and the CRT's buffer pool is never exhausted.

A chunk from ``read_chunk()`` points into the CRT's part buffer and holds it (and its client) alive. These
tests check the lifetimes (chunks outliving streams, loaders and the client cache), that every pinned byte
is given back, and that a reader hoarding chunks gets copies beyond the pin budget instead of a hang. The
tests of pool pinning turn off scattering parts over read() results (csrc/scattered_results.h), whose chunks
point into those results instead (tests/integration/test_scattered_reads.py).
"""

from __future__ import annotations

import gc
import hashlib
import random
from collections.abc import Iterator

import pytest
from torch.utils.data.datapipes.iter import IterableWrapper

from torchdata_s3 import S3Config, S3FileLoader, _core
from torchdata_s3.client import _forget_native_clients, native_client

pytestmark = pytest.mark.integration

MiB = 1024 * 1024
PART = 1 * MiB


def payload(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


@pytest.fixture
def unscattered() -> Iterator[None]:
    """Every part after an object's first in a pool buffer, as before parts were scattered over results."""
    _core.set_scattered_reads(False)
    try:
        yield
    finally:
        _core.set_scattered_reads(True)


def read_all_chunks(stream) -> list:  # type: ignore[no-untyped-def]
    chunks = []
    while (chunk := stream.read_chunk()) is not None:
        chunks.append(chunk)
    return chunks


def test_chunks_outlive_their_stream_loader_and_client(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    data = payload(5 * PART + 123, seed=1)
    boto_s3.put_object(Bucket=bucket, Key="obj", Body=data)
    loader = S3FileLoader(IterableWrapper([f"s3://{bucket}/obj"]), part_size_bytes=PART)
    [(_url, stream)] = list(loader)
    chunks = read_all_chunks(stream)
    assert len(chunks) >= 5  # one per part: the object really came in parts

    stream.close()
    del stream, loader
    _forget_native_clients()  # the cache no longer holds the client: only the chunks do
    gc.collect()

    assert b"".join(bytes(memoryview(c)) for c in chunks) == data


@pytest.mark.usefixtures("unscattered")
def test_every_pinned_byte_is_given_back(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    data = payload(6 * PART, seed=2)
    boto_s3.put_object(Bucket=bucket, Key="obj", Body=data)
    config = S3Config.resolve(part_size_bytes=PART)
    client = native_client(config)
    assert client.pinned_pool_bytes == 0

    [(_url, stream)] = list(S3FileLoader(IterableWrapper([f"s3://{bucket}/obj"]), config=config))
    chunks = read_all_chunks(stream)
    assert client.pinned_pool_bytes == len(data)  # nothing was copied: every part is still the CRT's buffer
    assert hashlib.sha256(b"".join(chunks)).digest() == hashlib.sha256(data).digest()

    del chunks
    gc.collect()
    assert client.pinned_pool_bytes == 0

    # Bytes read through read()/readline() are released as the reader moves past them.
    [(_url, stream)] = list(S3FileLoader(IterableWrapper([f"s3://{bucket}/obj"]), config=config))
    assert stream.read() == data
    stream.close()
    assert client.pinned_pool_bytes == 0


def test_a_stream_dropped_unread_gives_back_its_parts(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    boto_s3.put_object(Bucket=bucket, Key="obj", Body=payload(4 * PART, seed=3))
    config = S3Config.resolve(part_size_bytes=PART, read_window_bytes=4 * PART)
    client = native_client(config)
    [(_url, stream)] = list(S3FileLoader(IterableWrapper([f"s3://{bucket}/obj"]), config=config))
    first = stream.read(10)  # the stream now holds queued parts
    assert len(first) == 10
    del stream
    gc.collect()
    assert client.pinned_pool_bytes == 0


@pytest.mark.usefixtures("unscattered")
def test_a_reader_hoarding_chunks_gets_copies_beyond_the_pin_budget(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    # The smallest pool the CRT accepts (256 MiB, of which it reserves 128 MiB) lends at most half of the
    # rest to readers; a reader keeping more than that must neither hang (waiting for pool memory it holds
    # itself) nor see wrong bytes.
    part = 4 * MiB
    data = payload(100 * MiB, seed=4)
    boto_s3.put_object(Bucket=bucket, Key="obj", Body=data)
    config = S3Config.resolve(part_size_bytes=part, memory_limit_bytes=256 * MiB, read_window_bytes=4 * part)
    client = native_client(config)
    assert client.pool_pin_budget == 64 * MiB

    [(_url, stream)] = list(S3FileLoader(IterableWrapper([f"s3://{bucket}/obj"]), config=config))
    chunks = read_all_chunks(stream)
    assert b"".join(chunks) == data
    assert 0 < client.pinned_pool_bytes <= client.pool_pin_budget
    del chunks
    gc.collect()
    assert client.pinned_pool_bytes == 0


def test_small_objects_are_copied_out_of_their_part_buffer(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    # A 10 kB object arrives in a part-sized pool buffer: keeping its chunk must not keep a whole part.
    # Streamed (small_object_bytes=0), as S3Client.open() reads it: the loader would yield it whole.
    data = payload(10_000, seed=5)
    boto_s3.put_object(Bucket=bucket, Key="small", Body=data)
    config = S3Config.resolve(part_size_bytes=PART, small_object_bytes=0)
    client = native_client(config)
    [(_url, stream)] = list(S3FileLoader(IterableWrapper([f"s3://{bucket}/small"]), config=config))
    chunks = read_all_chunks(stream)
    assert b"".join(chunks) == data
    assert client.pinned_pool_bytes == 0
