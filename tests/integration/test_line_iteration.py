"""`for line in stream`: lines cut natively from the download (csrc/line_iterator.h, S3ObjectStream.__iter__).

What must hold: the lines are io.BytesIO's whatever their length (across chunks and parts, longer than a
part, none at all, no final newline), whether the stream came from the loader or from open(); nothing is
buffered above the reader meanwhile (the native path is the one taken); and any other call during the
iteration (tell, read, seek, readline, close) sees the position right after the last line handed out, after
which the iteration goes on from wherever that call left the stream, as a BufferedReader's would. The
sanitizer run includes this file.
"""

from __future__ import annotations

import io
import random
from collections.abc import Iterator
from typing import Any

import pytest
from torch.utils.data.datapipes.iter import IterableWrapper
from torch.utils.data.datapipes.utils.common import StreamWrapper

from torchdata_s3 import S3Client, S3Config, S3FileLoader

pytestmark = pytest.mark.integration

KIB = 1024
PART = 256 * KIB  # several parts and chunks per object, cheaply


def text(seed: int, size: int, mean_line: int) -> bytes:
    """`size` bytes of lines of random lengths around `mean_line` (the last one without its newline)."""
    rng = random.Random(seed)
    out = bytearray()
    while len(out) < size:
        out += rng.randbytes(int(rng.expovariate(1 / mean_line))).replace(b"\n", b"x") + b"\n"
    return bytes(out[:size])


OBJECTS = {
    "random-bytes": random.Random(1).randbytes(3 * PART + 123),  # a newline every 256 bytes on average
    "short-lines": text(2, 2 * PART + 5, 40),
    "lines-longer-than-a-part": text(3, 4 * PART, 300 * KIB),
    "only-newlines": b"\n" * (PART + 3),
    "no-newline": b"y" * (PART + 17),
    "crlf": b"".join(b"row %d,\xc3\xa9\r\n" % i for i in range(20_000)),
    "empty": b"",
}


@pytest.fixture
def urls(boto_s3, bucket: str) -> dict[str, str]:  # type: ignore[no-untyped-def]
    for name, data in OBJECTS.items():
        boto_s3.put_object(Bucket=bucket, Key=f"lines/{name}", Body=data)
    return {name: f"s3://{bucket}/lines/{name}" for name in OBJECTS}


def config() -> S3Config:
    return S3Config.resolve(part_size_bytes=PART)


def loaded(url: str) -> Any:
    [(_url, stream)] = list(S3FileLoader(IterableWrapper([url]), config=config()))
    return stream


@pytest.mark.parametrize("name", list(OBJECTS))
@pytest.mark.parametrize("door", ["loader", "open"])
def test_lines_are_bytesio_lines(urls: dict[str, str], name: str, door: str) -> None:
    stream = loaded(urls[name]) if door == "loader" else S3Client(config()).open(urls[name])
    assert list(stream) == list(io.BytesIO(OBJECTS[name]))
    assert stream.read() == b"" and stream.tell() == len(OBJECTS[name])


def test_nothing_is_buffered_above_the_reader_while_lines_are_cut(urls: dict[str, str]) -> None:
    # Through BufferedReader, the raw reader would be a buffer's length (here the object's) ahead.
    stream = loaded(urls["random-bytes"])
    seen = 0
    for count, line in enumerate(stream):
        seen += len(line)
        if count % 997 == 0:
            assert stream.raw.tell() == stream.tell() == seen
    assert seen == len(OBJECTS["random-bytes"])


def steps(stream: Any, rng: random.Random) -> Iterator[tuple[str, Any]]:
    """Lines, with another call on the stream now and then; each step as (what, its result)."""
    lines = iter(stream)
    for step in range(400):
        line = next(lines, None)
        if line is None:
            return
        yield "line", line
        if step % 37 == 5:
            yield "tell", stream.tell()
        elif step % 53 == 7:
            yield "read", stream.read(rng.choice([1, 100, 5000]))
        elif step % 71 == 9:
            yield "readline", stream.readline()
        elif step % 89 == 11:
            target = max(0, stream.tell() - rng.choice([1, 700, PART]))
            yield "seek", stream.seek(target)
        if step % 101 == 13:
            lines = iter(stream)  # a new iteration from wherever the stream is


@pytest.mark.parametrize("name", ["random-bytes", "short-lines", "crlf"])
def test_other_calls_during_the_iteration_see_its_position(urls: dict[str, str], name: str) -> None:
    stream = loaded(urls[name])
    reference = io.BytesIO(OBJECTS[name])
    assert list(steps(stream, random.Random(7))) == list(steps(reference, random.Random(7)))
    assert stream.tell() == reference.tell()
    assert stream.read() == reference.read()


def test_breaking_out_leaves_the_stream_after_the_last_line(urls: dict[str, str]) -> None:
    data = OBJECTS["short-lines"]
    stream = loaded(urls["short-lines"])  # the loader's wrapper: a loop left early leaves the stream open
    taken = []
    for line in stream:
        taken.append(line)
        if len(taken) == 1000:
            break
    assert stream.read() == data[len(b"".join(taken)) :]


def test_a_stream_closed_during_the_iteration_refuses_the_next_line(urls: dict[str, str]) -> None:
    stream = loaded(urls["random-bytes"])
    lines = iter(stream)
    assert next(lines) == OBJECTS["random-bytes"][: OBJECTS["random-bytes"].index(b"\n") + 1]
    stream.close()
    with pytest.raises(ValueError, match="closed file"):
        next(lines)
    with pytest.raises(ValueError, match="closed file"):
        next(iter(stream))


def test_the_loaders_wrapper_is_torchs_with_a_read_loops_calls_direct(urls: dict[str, str]) -> None:
    data = OBJECTS["short-lines"]
    stream = loaded(urls["short-lines"])
    assert isinstance(stream, StreamWrapper) and isinstance(stream.file_obj, io.BufferedReader)
    assert stream.size == len(data) and stream.url == urls["short-lines"]  # the rest through __getattr__
    assert stream.readline() == data[: data.index(b"\n") + 1]
    position = stream.tell()
    assert stream.read(10) == data[position : position + 10]
    buffer = bytearray(300_000)
    got = stream.readinto(buffer)
    assert buffer[:got] == data[position + 10 : position + 10 + got]
    rest = b"".join(bytes(chunk) for chunk in iter(stream.read_chunk, None))
    assert rest == data[position + 10 + got :]
    stream.close()
    assert stream.closed and stream.file_obj.closed


def test_the_line_iterator_is_made_by_a_stream_only() -> None:
    from torchdata_s3 import _core

    with pytest.raises(TypeError):
        _core.lines(object(), lambda: b"")  # type: ignore[arg-type]
