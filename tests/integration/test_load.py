"""S3FileLoader / load_files_by_s3 and the object streams, against a real S3-protocol server."""

from __future__ import annotations

import hashlib
import io
import os
import random

import pytest
from torch.utils.data.datapipes.iter import IterableWrapper
from torch.utils.data.datapipes.utils.common import StreamWrapper

from torchdata_s3 import S3Client, S3Config, S3FileLoader, parse_s3_url

pytestmark = pytest.mark.integration

MiB = 1024 * 1024
SMALL_PART = 256 * 1024  # makes "around the part size" cheap to test


def payload(size: int, seed: int = 0) -> bytes:
    # Deterministic and without repeats, so a misplaced or duplicated part cannot go unnoticed.
    return random.Random(seed).randbytes(size)


def load(*urls: str, **kwargs: object) -> list[tuple[str, StreamWrapper]]:
    return list(S3FileLoader(IterableWrapper(list(urls)), **kwargs))


@pytest.mark.parametrize(
    "size",
    [0, 1, SMALL_PART - 1, SMALL_PART, SMALL_PART + 1, 2 * SMALL_PART, 3 * SMALL_PART + 7],
)
def test_sizes_around_the_part_size_arrive_exactly(boto_s3, bucket: str, size: int) -> None:  # type: ignore[no-untyped-def]
    data = payload(size, seed=size)
    boto_s3.put_object(Bucket=bucket, Key="obj", Body=data)
    [(url, stream)] = load(f"s3://{bucket}/obj", part_size_bytes=SMALL_PART)
    assert url == f"s3://{bucket}/obj"
    assert isinstance(stream, StreamWrapper)
    assert stream.read() == data
    assert stream.read() == b""


def test_large_object_every_byte(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    size = 100 * MiB + 12345
    data = payload(size, seed=7)
    boto_s3.put_object(Bucket=bucket, Key="large.bin", Body=data)
    expected = hashlib.sha256(data).hexdigest()
    del data
    [(_url, stream)] = load(f"s3://{bucket}/large.bin")
    digest = hashlib.sha256()
    total = 0
    while True:
        chunk = stream.read(MiB + 3)  # reads that straddle part boundaries
        if not chunk:
            break
        digest.update(chunk)
        total += len(chunk)
    assert total == size
    assert digest.hexdigest() == expected


def test_stream_reads_like_a_binary_file(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    lines = [f"line {i} {'x' * (i % 97)}\n".encode() for i in range(5000)]
    data = b"".join(lines) + b"last line without newline"
    boto_s3.put_object(Bucket=bucket, Key="text", Body=data)
    client = S3Client(S3Config.resolve(part_size_bytes=64 * 1024))
    url = f"s3://{bucket}/text"

    with client.open(url) as stream:
        assert isinstance(stream, io.BufferedIOBase) and stream.readable() and stream.seekable()
        assert stream.size == len(data)
        assert list(stream) == list(io.BytesIO(data))  # iteration crosses part boundaries

    with client.open(url) as stream, io.BytesIO(data) as reference:
        assert stream.readline() == reference.readline()
        assert stream.readline(3) == reference.readline(3)
        assert stream.read(10) == reference.read(10)
        assert stream.read1(5) == reference.read(5)
        buffer = bytearray(70_000)
        expected = bytearray(70_000)
        assert stream.readinto(buffer) == reference.readinto(expected)
        assert buffer == expected
        assert stream.tell() == reference.tell()
        assert stream.seek(100, io.SEEK_CUR) == reference.seek(100, io.SEEK_CUR)
        assert stream.readlines() == reference.readlines()
        assert stream.read() == b"" and stream.readline() == b"" and stream.read1() == b""

    stream = client.open(url)
    assert stream.read(10) == data[:10] and stream.seek(0) == 0 and stream.read() == data  # seek back, again
    stream.close()
    assert stream.closed and stream.raw.closed
    with pytest.raises(ValueError, match="closed file"):
        stream.read()
    with pytest.raises(ValueError, match="closed file"):
        next(iter(stream))
    other = client.open(url)
    assert not other.closed and next(iter(other)) == data[: data.index(b"\n") + 1]
    other.raw.close()  # closed under the buffered stream: both say so (ObjectReader.closed is an attribute)
    assert other.closed and other.raw.closed


def test_read_chunk_hands_out_native_memory(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    data = payload(5 * SMALL_PART + 11, seed=3)
    boto_s3.put_object(Bucket=bucket, Key="chunks", Body=data)
    stream = S3Client(S3Config.resolve(part_size_bytes=SMALL_PART)).open(f"s3://{bucket}/chunks")
    stream.read(5)
    pieces = []
    while (chunk := stream.read_chunk()) is not None:
        view = memoryview(chunk)
        assert view.readonly and view.format == "B"
        pieces.append(bytes(view))
    assert b"".join(pieces) == data[5:]


@pytest.mark.parametrize(
    ("first", "last"), [(0, 0), (5, 9), (SMALL_PART - 2, SMALL_PART + 2), (0, 3 * SMALL_PART)]
)
def test_byte_ranges(boto_s3, bucket: str, first: int, last: int) -> None:  # type: ignore[no-untyped-def]
    data = payload(3 * SMALL_PART + 1, seed=5)
    boto_s3.put_object(Bucket=bucket, Key="ranged", Body=data)
    client = S3Client(S3Config.resolve(part_size_bytes=SMALL_PART))
    with client.open_native(parse_s3_url(f"s3://{bucket}/ranged"), byte_range=(first, last)) as stream:
        assert stream.size == last - first + 1
        assert stream.read() == data[first : last + 1]


def test_prefixes_expand_in_key_order_and_objects_keep_input_order(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    contents = {f"shards/{i:03d}.txt": payload(1000 + i, seed=i) for i in range(40)}
    for key, data in contents.items():
        boto_s3.put_object(Bucket=bucket, Key=key, Body=data)
    boto_s3.put_object(Bucket=bucket, Key="shards/", Body=b"")  # folder marker: not an object to load
    boto_s3.put_object(Bucket=bucket, Key="single", Body=b"single")
    inputs = [f"s3://{bucket}/single", f"s3://{bucket}/shards/", f"s3://{bucket}/single"]
    loaded = [(url, stream.read()) for url, stream in load(*inputs, prefetch=4)]
    expected = (
        [(f"s3://{bucket}/single", b"single")]
        + [(f"s3://{bucket}/{key}", data) for key, data in sorted(contents.items())]
        + [(f"s3://{bucket}/single", b"single")]
    )
    assert loaded == expected


@pytest.mark.parametrize("prefetch", [0, 1, 3, 64])
def test_prefetch_depths_keep_order_and_content(boto_s3, bucket: str, prefetch: int) -> None:  # type: ignore[no-untyped-def]
    contents = {f"k{i:02d}": payload(200 + 50 * i, seed=100 + i) for i in range(20)}
    for key, data in contents.items():
        boto_s3.put_object(Bucket=bucket, Key=key, Body=data)
    urls = [f"s3://{bucket}/{key}" for key in contents]
    pipe = S3FileLoader(IterableWrapper(urls), prefetch=prefetch, max_inflight_bytes=1000)
    assert [(url, stream.read()) for url, stream in pipe] == [
        (u, contents[u.rsplit("/", 1)[1]]) for u in urls
    ]


def test_abandoning_iteration_cancels_prefetched_downloads(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    for i in range(10):
        boto_s3.put_object(Bucket=bucket, Key=f"k{i}", Body=payload(3 * SMALL_PART, seed=i))
    pipe = S3FileLoader(
        IterableWrapper([f"s3://{bucket}/k{i}" for i in range(10)]), part_size_bytes=SMALL_PART
    )
    iterator = iter(pipe)
    _url, first = next(iterator)
    expected = payload(3 * SMALL_PART, seed=0)
    assert first.read(10) == expected[:10]
    iterator.close()  # the generator's cleanup closes what was fetched ahead
    assert first.read() == expected[10:]  # the stream already handed out stays usable


def test_functional_form_and_original_arguments(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    boto_s3.put_object(Bucket=bucket, Key="f", Body=b"hello")
    pipe = IterableWrapper([f"s3://{bucket}/f"]).load_files_by_s3(
        5000, "us-east-1", buffer_size=4 * MiB, multi_part_download=False
    )
    assert isinstance(pipe, S3FileLoader)
    assert pipe.client.config.request_timeout_ms == 5000
    assert pipe.client.config.read_window_bytes == 4 * MiB
    assert len(pipe) == 1
    assert [(u, s.read()) for u, s in pipe] == [(f"s3://{bucket}/f", b"hello")]


def test_classic_readlines_pipeline(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    for shard in range(3):
        body = "".join(f"shard{shard}-line{i}\n" for i in range(100)).encode()
        boto_s3.put_object(Bucket=bucket, Key=f"text/{shard}.txt", Body=body)
    lines = list(IterableWrapper([f"s3://{bucket}/text/"]).load_files_by_s3().readlines(return_path=False))
    assert lines == [f"shard{s}-line{i}".encode() for s in range(3) for i in range(100)]


def test_open_rejects_prefix(s3_endpoint: str) -> None:
    with pytest.raises(IsADirectoryError, match="names a prefix"):
        S3Client().open("s3://bucket/dir/")


def test_environment_free_explicit_config(boto_s3, bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    boto_s3.put_object(Bucket=bucket, Key="k", Body=b"explicit")
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    config = S3Config(endpoint_url=endpoint, access_key_id="a", secret_access_key="b")
    assert [s.read() for _u, s in load(f"s3://{bucket}/k", config=config)] == [b"explicit"]
