"""Small objects yielded whole (torchdata_s3/landed.py): which objects land, what their streams do, and what
happens when their GET fails partway through the body.

The loading doors (the loader, the datasets, the nodes source) hand an object of at most
``small_object_bytes`` and at most a part to the reader once all of it has arrived, as a read-only
``io.BytesIO``; every other object, and every ``S3Client.open()``, streams (``S3ObjectStream``).
"""

from __future__ import annotations

import io
import multiprocessing
import pickle
import random
from collections.abc import Iterator

import pytest
from torch.utils.data.datapipes.iter import IterableWrapper

from tests.fault_proxy import Fault, FaultProxy
from tests.s3_server import MotoServer
from torchdata_s3 import (
    S3Client,
    S3Config,
    S3FileLoader,
    S3IterableDataset,
    S3MapDataset,
    S3NetworkError,
)
from torchdata_s3.landed import LandedObjectStream
from torchdata_s3.reader import S3ObjectStream

pytestmark = pytest.mark.integration

KiB = 1024
MiB = 1024 * KiB


def payload(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


def put(boto_s3, bucket: str, key: str, data: bytes) -> str:  # type: ignore[no-untyped-def]
    boto_s3.put_object(Bucket=bucket, Key=key, Body=data)
    return f"s3://{bucket}/{key}"


def loaded_streams(urls: list[str], **options: object) -> list:  # type: ignore[type-arg]
    """The streams the loader yields, in order, in torch's StreamWrapper (which closes its stream when it is
    collected: keep it while reading)."""
    return [wrapper for _url, wrapper in S3FileLoader(IterableWrapper(urls), **options)]


def kinds(streams: list) -> list[type]:  # type: ignore[type-arg]
    return [type(wrapper.file_obj) for wrapper in streams]


def test_a_small_object_arrives_whole_with_the_streams_attributes(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    data = b"first line\nsecond line\n" + payload(100 * KiB, seed=1)
    url = put(boto_s3, bucket, "dir/small.bin", data)
    [wrapper] = loaded_streams([url])
    stream = wrapper.file_obj

    assert type(stream) is LandedObjectStream
    assert isinstance(stream, io.BufferedIOBase)
    assert (stream.size, stream.bytes_fetched, stream.failure) == (len(data), len(data), None)
    assert stream.etag == boto_s3.head_object(Bucket=bucket, Key="dir/small.bin")["ETag"]
    assert (stream.url, stream.name, stream.bucket, stream.key) == (url, url, bucket, "dir/small.bin")
    assert url in repr(stream)
    assert stream.readline() == b"first line\n"
    assert next(iter(stream)) == b"second line\n"
    stream.seek(-10, io.SEEK_END)
    assert stream.read() == data[-10:]
    stream.seek(0)
    assert stream.read_chunk() == data
    assert stream.read_chunk() is None
    stream.seek(5)
    target = bytearray(7)
    assert stream.readinto(target) == 7 and bytes(target) == data[5:12]


def test_a_landed_stream_is_read_only_and_refuses_pickling(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    data = payload(5000, seed=2)
    url = put(boto_s3, bucket, "small", data)
    [wrapper] = loaded_streams([url])
    stream = wrapper.file_obj

    assert not stream.writable()
    for write in (lambda: stream.write(b"x"), lambda: stream.writelines([b"x"]), lambda: stream.truncate(0)):
        with pytest.raises(io.UnsupportedOperation, match="open for reading"):
            write()
    view = stream.getbuffer()
    assert view.readonly and bytes(view) == data
    with pytest.raises(TypeError, match=rf"{url}.*cannot be pickled"):
        pickle.dumps(stream)
    stream.close()  # a view of the bytes does not hold the stream open, as BytesIO's own export would
    assert stream.closed and bytes(view) == data


def test_which_objects_land_and_which_stream(boto_s3, bucket: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    limit = 256 * KiB
    at_limit = put(boto_s3, bucket, "at-limit", payload(limit, seed=3))
    over_limit = put(boto_s3, bucket, "over-limit", payload(limit + 1, seed=4))
    empty = put(boto_s3, bucket, "empty", b"")
    urls = [at_limit, over_limit, empty]

    streams = loaded_streams(urls, small_object_bytes=limit)
    assert kinds(streams) == [LandedObjectStream, S3ObjectStream, LandedObjectStream]
    for url, stream in zip(urls, streams):
        assert stream.read() == boto_s3.get_object(Bucket=bucket, Key=url.rsplit("/", 1)[1])["Body"].read()
    # Within a part too: one GET brings all of a landed object.
    assert kinds(loaded_streams(urls, part_size_bytes=64 * KiB)) == [
        S3ObjectStream,
        S3ObjectStream,
        LandedObjectStream,
    ]
    # 0: every object streams, even an empty one.
    assert set(kinds(loaded_streams(urls, small_object_bytes=0))) == {S3ObjectStream}
    # So does a loader with a cache: its objects go through the cache as they are read.
    assert set(kinds(loaded_streams(urls, cache_dir=str(tmp_path)))) == {S3ObjectStream}
    # S3Client.open() always streams.
    assert type(S3Client(S3Config.resolve()).open(at_limit)) is S3ObjectStream


def test_small_object_bytes_must_be_a_size() -> None:
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="small_object_bytes must be an integer >= 0"):
            S3Config.resolve(small_object_bytes=bad)


def test_the_datasets_yield_landed_objects_too(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    data = [payload(1000 * (index + 1), seed=10 + index) for index in range(3)]
    urls = [put(boto_s3, bucket, f"set/{index}", body) for index, body in enumerate(data)]

    iterable = list(S3IterableDataset.from_prefix(f"s3://{bucket}/set/"))
    mapped = S3MapDataset.from_objects(urls)
    for index, body in enumerate(data):
        for item in (iterable[index], mapped[index]):
            stream = item[1] if isinstance(item, tuple) else item
            assert type(stream) is LandedObjectStream
            assert stream.read() == body


@pytest.fixture
def proxy(moto_server: MotoServer, s3_endpoint: str) -> Iterator[FaultProxy]:
    with FaultProxy(moto_server.port, seed=1) as running:
        yield running


def test_a_body_cut_for_good_is_raised_at_the_objects_turn(boto_s3, bucket: str, proxy: FaultProxy) -> None:  # type: ignore[no-untyped-def]
    # The object would be yielded whole, so a failure of its body (after the retries) is raised where it would
    # be yielded, in input order, as the original torchdata loader raised its download errors; the objects
    # before it are yielded exact first.
    before = put(boto_s3, bucket, "a", payload(50 * KiB, seed=20))
    failing = put(boto_s3, bucket, "b", payload(50 * KiB, seed=21))
    failing_path = "/" + failing[len("s3://") :]
    proxy.force(Fault.CUT_BODY, 100, eligible=lambda request: request.path == failing_path)
    config = S3Config.resolve(endpoint_url=proxy.endpoint_url, max_retries=1, max_throttle_retries=1)

    loaded = iter(S3FileLoader(IterableWrapper([before, failing]), config=config))
    url, stream = next(loaded)
    assert (url, stream.read()) == (before, payload(50 * KiB, seed=20))
    with pytest.raises(S3NetworkError) as raised:
        next(loaded)
    assert raised.value.url == failing
    assert proxy.injected == {Fault.CUT_BODY: 2}  # one attempt and one retry


def _read_in_a_forked_child(stream: LandedObjectStream, results: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    stream.seek(0)
    results.put(stream.read())


def test_a_forked_child_reads_an_inherited_landed_stream(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    # Its bytes are in the process's memory, which the child inherits: nothing is left to fetch.
    data = payload(20 * KiB, seed=30)
    [wrapper] = loaded_streams([put(boto_s3, bucket, "inherited", data)])
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_read_in_a_forked_child, args=(wrapper.file_obj, results))
    child.start()
    try:
        assert results.get(timeout=30) == data
    finally:
        child.join(timeout=30)
    assert child.exitcode == 0
