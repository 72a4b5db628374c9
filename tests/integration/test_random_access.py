"""Seekable streams: every sequence of reads and seeks gives what io.BytesIO gives, fetching what the policy
in torchdata_s3/reader.py says, against a real S3-protocol server."""

from __future__ import annotations

import io
import random
from collections.abc import Iterator
from typing import Any, Callable

import pytest
from torch.utils.data.datapipes.iter import IterableWrapper

from torchdata_s3 import S3Client, S3Config, S3FileLoader, S3FileNotFoundError, S3IntegrityError
from torchdata_s3.reader import BUFFER_BYTES, KEPT_SMALL_SOURCES, RANDOM_READ_BYTES

pytestmark = pytest.mark.integration

KiB = 1024
MiB = 1024 * KiB
PART = 256 * KiB
RETAIN = 1 * MiB


def payload(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


def config(**options: Any) -> S3Config:
    return S3Config.resolve(**{"part_size_bytes": PART, "retain_bytes": RETAIN, **options})


def random_operation(rng: random.Random, size: int) -> tuple[str, Callable[[Any], Any]]:
    """One call a reader of a file object makes, as (description, function of the file)."""
    kind = rng.choice(
        ["seek", "seek", "read", "read", "readline", "readinto", "read1", "peek-free", "tell", "next-line"]
    )
    if kind == "seek":
        whence = rng.choice([io.SEEK_SET, io.SEEK_CUR, io.SEEK_END])
        span = size + 10
        offset = {
            io.SEEK_SET: rng.randrange(0, span),
            io.SEEK_CUR: rng.randrange(-span // 4, span // 4),
            io.SEEK_END: -rng.randrange(0, span),
        }[whence]

        def seek(f: Any) -> Any:
            try:
                return f.seek(offset, whence)
            except ValueError:  # a negative position: refused by both, position unchanged
                return "refused"

        return f"seek({offset}, {whence})", seek
    if kind == "read":
        n = rng.choice([-1, 0, 1, 7, 4096, rng.randrange(0, 3 * PART)])
        return f"read({n})", lambda f: f.read(n)
    if kind == "readline":
        n = rng.choice([-1, 5, 300])
        return f"readline({n})", lambda f: f.readline(n)
    if kind == "readinto":
        n = rng.choice([1, 100, 70_000, PART, 2 * PART + 3])  # PART: MIN_SCATTERED_READ_BYTES

        def readinto(f: Any) -> bytes:
            target = bytearray(n)
            got = f.readinto(target)
            return bytes(target[:got])

        return f"readinto({n})", readinto
    if kind == "next-line":
        return "next(iter(f))", lambda f: next(iter(f), b"")  # a line iteration begun and left
    if kind == "read1":
        # BytesIO's read1 returns everything; ours returns at least one byte. Compare through read(n).
        return "read(64)", lambda f: f.read(64)
    return "tell()", lambda f: f.tell()


def replay(stream: Any, data: bytes, seed: int, steps: int = 150) -> None:
    rng = random.Random(seed)
    reference = io.BytesIO(data)
    history = []
    for _ in range(steps):
        description, operation = random_operation(rng, len(data))
        history.append(description)
        expected = operation(reference)
        got = operation(stream)
        assert got == expected, f"after {history[-8:]}: {got!r:.80} != {expected!r:.80}"
        assert stream.tell() == reference.tell(), history[-8:]


@pytest.mark.parametrize("size", [0, 1, 1000, RETAIN, RETAIN + 1, 5 * MiB + 17])
@pytest.mark.parametrize("seed", [1, 2])
def test_any_sequence_of_seeks_and_reads_matches_bytesio(boto_s3, bucket: str, size: int, seed: int) -> None:  # type: ignore[no-untyped-def]
    data = payload(size, seed=size)
    boto_s3.put_object(Bucket=bucket, Key="obj", Body=data)
    url = f"s3://{bucket}/obj"
    with S3Client(config()).open(url) as stream:
        replay(stream, data, seed)
    [(_url, loaded)] = list(S3FileLoader([url], config=config()))
    replay(loaded, data, seed + 100)
    loaded.close()


def test_an_object_held_whole_is_fetched_once_however_it_is_read(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    data = payload(RETAIN - 5, seed=3)
    boto_s3.put_object(Bucket=bucket, Key="small", Body=data)
    with S3Client(config()).open(f"s3://{bucket}/small") as stream:
        assert stream.seek(-100, io.SEEK_END) == len(data) - 100
        assert stream.read() == data[-100:]
        for _ in range(3):
            stream.seek(0)
            assert stream.read() == data
        stream.seek(12345)
        assert stream.read(10) == data[12345:12355]
        assert stream.bytes_fetched == len(data)


def test_an_object_held_whole_fetches_only_what_random_reads_touch_and_keeps_it(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    data = payload(10 * MiB, seed=9)
    boto_s3.put_object(Bucket=bucket, Key="obj", Body=data)
    with S3Client(config(retain_bytes=16 * MiB)).open(f"s3://{bucket}/obj") as stream:
        for _ in range(2):  # the second round is served from what the first fetched
            stream.seek(-8, io.SEEK_END)
            assert stream.read() == data[-8:]
            stream.seek(3 * MiB)
            assert stream.read(100) == data[3 * MiB : 3 * MiB + 100]
            stream.seek(7 * MiB)
            assert stream.read(100) == data[7 * MiB : 7 * MiB + 100]
            assert stream.bytes_fetched == 3 * RANDOM_READ_BYTES


def test_a_large_object_fetches_about_what_random_reads_ask_for(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    # Kept small for moto, which serves each ranged GET from a copy of the whole object: a 40 MiB object in
    # 256 KiB parts once stalled it past the CRT's throughput check under the sanitizers.
    data = payload(12 * MiB, seed=4)
    boto_s3.put_object(Bucket=bucket, Key="large", Body=data)
    offsets = [12 * MiB - 100_000, 3 * MiB, 8 * MiB, 5 * MiB]
    with S3Client(config()).open(f"s3://{bucket}/large") as stream:
        stream.seek(-8, io.SEEK_END)  # a footer first: only the tail is fetched
        assert stream.read() == data[-8:]
        assert stream.bytes_fetched <= RANDOM_READ_BYTES
        for offset in offsets:
            stream.seek(offset)
            assert stream.read(5000) == data[offset : offset + 5000]
        assert (
            stream.bytes_fetched <= len(offsets) * RANDOM_READ_BYTES
        )  # the first is in the tail's last part
        # Reading on from a random position grows the ranges until it is a full-speed scan.
        stream.seek(2 * MiB)
        assert stream.read() == data[2 * MiB :]
        assert stream.bytes_fetched <= len(offsets) * RANDOM_READ_BYTES + len(data) - 2 * MiB + PART


def count_gets(stream: Any, monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """The GETs a stream's reader starts from now on (each still sent to the real server), as their
    arguments."""
    started: list[dict] = []
    real_open = stream.raw._open

    def spying_open(**request: Any) -> Any:
        started.append(request)
        return real_open(**request)

    monkeypatch.setattr(stream.raw, "_open", spying_open)
    return started


def test_a_large_read_after_a_small_one_is_one_get_not_a_doubling_ramp(  # type: ignore[no-untyped-def]
    boto_s3, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # torch.load reads a record's 30-byte header, then the whole tensor in one call: that call should not
    # pay a round trip per doubling of the range (1, 2, 4, 8 MiB), which on S3 is 30 ms each.
    data = payload(10 * MiB, seed=6)
    boto_s3.put_object(Bucket=bucket, Key="large", Body=data)
    with S3Client(config()).open(f"s3://{bucket}/large") as stream:
        stream.seek(-8, io.SEEK_END)
        assert stream.read() == data[-8:]
        gets = count_gets(stream, monkeypatch)
        stream.seek(100)
        assert stream.read(30) == data[100:130]
        wanted = 6 * MiB
        assert stream.read(wanted) == data[130 : 130 + wanted]
        # The header's range, then one GET for (almost) all of the large read: BufferedReader hands the raw
        # reader all but its last buffer-full directly, and fills its buffer for the rest (the rest of the
        # object, as reads went on in order). Before: 2 MiB, then 4 MiB, each a round trip.
        assert len(gets) <= 3, gets
        first, last = gets[1]["byte_range"]
        assert last - first + 1 >= wanted - BUFFER_BYTES, gets


def test_a_large_object_keeps_its_few_small_gets_for_readers_going_back_and_forth(  # type: ignore[no-untyped-def]
    boto_s3, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # torch.load reads records at an object's end and start in turn; each return to a place already
    # fetched must not cost another GET. At most KEPT_SMALL_SOURCES such GETs stay open.
    data = payload(10 * MiB, seed=7)
    boto_s3.put_object(Bucket=bucket, Key="large", Body=data)
    places = [10 * MiB - 5000, 1000, 4 * MiB, 7 * MiB]  # the first is in the tail fetched by the seek
    assert len(places) <= KEPT_SMALL_SOURCES
    with S3Client(config()).open(f"s3://{bucket}/large") as stream:
        stream.seek(0, io.SEEK_END)
        gets = count_gets(stream, monkeypatch)
        for _ in range(3):
            for place in places:
                stream.seek(place)
                assert stream.read(100) == data[place : place + 100]
        assert len(gets) == len(places) - 1, gets
        assert stream.bytes_fetched <= len(places) * RANDOM_READ_BYTES
        # Further places: beyond KEPT_SMALL_SOURCES besides the current one, the oldest are closed.
        for place in (2 * MiB, 5 * MiB + 512 * KiB, 8 * MiB + 200 * KiB, 3 * MiB + 200 * KiB):
            stream.seek(place)
            assert stream.read(100) == data[place : place + 100]
        assert len(gets) == len(places) - 1 + 4, gets
        assert len(stream.raw._kept) == KEPT_SMALL_SOURCES


def test_a_large_object_read_in_order_is_fetched_once(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    data = payload(6 * MiB + 3, seed=5)
    boto_s3.put_object(Bucket=bucket, Key="large", Body=data)
    [(_url, stream)] = list(S3FileLoader([f"s3://{bucket}/large"], config=config()))
    pieces = []
    while chunk := stream.read(100_000):
        pieces.append(chunk)
        stream.seek(-10, io.SEEK_CUR)  # short steps back are served from the part held
        assert stream.read(10) == chunk[-10:]
    assert b"".join(pieces) == data
    assert stream.bytes_fetched == len(data)


def test_read_chunk_mixes_with_reads_and_seeks(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    data = payload(3 * RETAIN, seed=6)
    boto_s3.put_object(Bucket=bucket, Key="obj", Body=data)
    with S3Client(config()).open(f"s3://{bucket}/obj") as stream:
        assert stream.readline(3) == data[:3]  # leaves bytes buffered: the next chunk starts with them
        pieces = [data[:3]]
        while (chunk := stream.read_chunk()) is not None:
            pieces.append(bytes(chunk))
        assert b"".join(pieces) == data
        stream.seek(RETAIN // 2)  # far behind: fetched again
        assert bytes(stream.read_chunk() or b"")[:100] == data[RETAIN // 2 : RETAIN // 2 + 100]
        assert stream.tell() > RETAIN // 2


def test_a_refetch_of_an_overwritten_object_raises_integrity_error(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    old = payload(8 * MiB, seed=7)
    boto_s3.put_object(Bucket=bucket, Key="obj", Body=old)
    with S3Client(config()).open(f"s3://{bucket}/obj") as stream:
        assert stream.read() == old
        boto_s3.put_object(Bucket=bucket, Key="obj", Body=payload(8 * MiB, seed=8))
        stream.seek(-10, io.SEEK_END)  # held (the last part read): the old version's bytes
        assert stream.read() == old[-10:]
        stream.seek(0)  # no longer held: a ranged GET, which must find the old version or fail
        with pytest.raises(S3IntegrityError, match=r"overwritten.*open the object again") as raised:
            stream.read(10)
        assert raised.value.http_status == 412 and raised.value.url == f"s3://{bucket}/obj"


def test_a_stream_remembers_the_error_of_its_failed_request(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    """``failure``: what a caller in C (torch's zip reader) may lose, for reads and for seeks from the end."""
    client = S3Client(config())
    with client.open(f"s3://{bucket}/missing") as stream:
        assert stream.failure is None
        with pytest.raises(S3FileNotFoundError) as seeking:
            stream.seek(-10, io.SEEK_END)  # the object's size is asked for: a suffix GET
        assert stream.failure is seeking.value
    boto_s3.put_object(Bucket=bucket, Key="obj", Body=payload(8 * MiB, seed=9))
    with client.open(f"s3://{bucket}/obj") as stream:
        stream.read()
        boto_s3.put_object(Bucket=bucket, Key="obj", Body=payload(8 * MiB, seed=10))
        stream.seek(0)  # no longer held (see the test above): a ranged GET that finds another version
        with pytest.raises(S3IntegrityError) as reading:
            stream.read(10)
        assert stream.failure is reading.value


def test_the_loader_raises_for_a_missing_object_when_it_yields_it(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    from torchdata_s3 import S3FileNotFoundError

    for key in ("a", "c"):
        boto_s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
    urls = [f"s3://{bucket}/{key}" for key in ("a", "b", "c")]
    iterator: Iterator = iter(S3FileLoader(IterableWrapper(urls)))
    assert next(iterator)[0] == urls[0]  # nothing read: the error still comes with the object it belongs to
    with pytest.raises(S3FileNotFoundError, match=f"s3://{bucket}/b"):
        next(iterator)


def test_code_written_for_the_original_catches_value_error(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    from torchdata_s3 import S3FileNotFoundError

    with pytest.raises(ValueError) as raised:
        list(S3FileLoader([f"s3://{bucket}/missing"]))  # a plain list, as the original accepted
    assert isinstance(raised.value, S3FileNotFoundError) and isinstance(raised.value, FileNotFoundError)


def test_a_plain_list_is_a_source(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    from torchdata_s3 import S3FileLister

    boto_s3.put_object(Bucket=bucket, Key="k", Body=b"payload")
    [(url, stream)] = list(S3FileLoader([f"s3://{bucket}/k"]))
    assert url == f"s3://{bucket}/k" and stream.read() == b"payload"
    assert list(S3FileLister([f"s3://{bucket}/"])) == [f"s3://{bucket}/k"]


def test_a_range_past_the_end_raises_instead_of_reporting_the_error_document(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    # The CRT sometimes hands the 416 answer's headers to the headers callback; its Content-Length (of the
    # XML error document) once passed for the object's size. Several tries: it did not happen every time.
    from torchdata_s3 import S3Error, parse_s3_url

    boto_s3.put_object(Bucket=bucket, Key="obj", Body=b"")
    client = S3Client(config())
    for _ in range(10):
        stream = client.open_native(parse_s3_url(f"s3://{bucket}/obj"), byte_range=(1, 100))
        with pytest.raises(S3Error) as raised:
            stream.placement()
        assert raised.value.http_status == 416


def test_an_empty_objects_size_and_end_are_known_before_any_read(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    # The size asked first is fetched as a suffix range; moto answers that of an empty object without a
    # Content-Range (real S3: 416), which the CRT refuses. fsspec's get_file asks .size first.
    boto_s3.put_object(Bucket=bucket, Key="empty", Body=b"")
    client = S3Client(S3Config.resolve())
    with client.open(f"s3://{bucket}/empty") as stream:
        assert stream.size == 0
        assert stream.read() == b""
    with client.open(f"s3://{bucket}/empty") as stream:
        assert stream.seek(0, io.SEEK_END) == 0
        assert stream.read(10) == b""
