"""A large object read in pieces of one size is received straight into the `bytes` each read() returns.

csrc/scattered_results.h and the CRT patch "a GET part's body can be scattered" (cmake/AwsCrtPatches.cmake):
once a reader of a client has read in pieces of a size that divides a part, the parts of the objects it goes
on to read are planned as results of that size before they begin, lent to the CRT, and handed over by the
read() that reaches each. What must hold: every byte exact whichever way the object is read (pieces of that
size, other sizes, lines, chunks kept past the stream, seeking back), results handed out never change
afterwards (the planned results are reused once nobody holds them), a result's cached hash is never stale,
retries of cut bodies land again, and no CRT thread writes into a result after its stream was closed or
dropped (the sanitizer run includes this file).
"""

from __future__ import annotations

import gc
import io
import random
import time
from collections.abc import Iterator

import pytest
from torch.utils.data.datapipes.iter import IterableWrapper

from tests.fault_proxy import Fault, FaultProxy, ProxiedRequest
from tests.integration.given_up import give_up
from tests.s3_server import MotoServer
from torchdata_s3 import S3Client, S3Config, S3FileLoader, _core
from torchdata_s3.client import native_client
from torchdata_s3.reader import ObjectReader, S3ObjectStream
from torchdata_s3.url import parse_s3_url

pytestmark = pytest.mark.integration

KIB = 1024
PART = 1024 * KIB
PIECE = 256 * KIB  # _core.MIN_SCATTERED_READ_BYTES: the smallest read size parts are scattered over
SIZE = 5 * PART + 1234  # the last part and the last piece short


def payload(seed: int, size: int = SIZE) -> bytes:
    return random.Random(seed).randbytes(size)  # no repeats: a misplaced block cannot go unnoticed


@pytest.fixture
def objects(boto_s3, bucket: str) -> dict[str, bytes]:  # type: ignore[no-untyped-def]
    """A teacher object (read first, so that its client learns the read size) and four to read, by URL."""
    stored = {f"big/{name}": payload(seed) for seed, name in enumerate(["0-teacher", "a", "b", "c", "d"])}
    for key, data in stored.items():
        boto_s3.put_object(Bucket=bucket, Key=key, Body=data)
    return {f"s3://{bucket}/{key}": data for key, data in stored.items()}


@pytest.fixture
def proxy(moto_server: MotoServer, s3_endpoint: str) -> Iterator[FaultProxy]:
    with FaultProxy(moto_server.port, seed=13, stall_s=30) as running:
        yield running


def config_of_its_own(**options: object) -> S3Config:
    """A client of the test's own: the read size a client learned is the client's."""
    return S3Config.resolve(part_size_bytes=PART, max_connections=5 + len(options), **options)  # type: ignore[arg-type]


def load(urls: list[str], config: S3Config) -> Iterator[tuple[str, io.BufferedIOBase]]:
    return iter(S3FileLoader(IterableWrapper(urls), config=config))


def in_pieces(stream: io.BufferedIOBase, piece: int = PIECE) -> list[bytes]:
    return list(iter(lambda: stream.read(piece), b""))


def taught(objects: dict[str, bytes], config: S3Config) -> list[str]:
    """Reads the teacher object in pieces (its client learns the size); returns the other URLs."""
    teacher, *others = sorted(objects)
    [(_url, stream)] = list(load([teacher], config))
    assert b"".join(in_pieces(stream)) == objects[teacher]
    return others


def test_pieces_of_a_learned_size_are_received_into_their_results(objects: dict[str, bytes]) -> None:
    config = config_of_its_own()
    client = native_client(config)
    urls = taught(objects, config)
    landed_before = client.landed_bytes

    pieces = {url: in_pieces(stream) for url, stream in load(urls, config)}

    assert {url: b"".join(read) for url, read in pieces.items()} == {url: objects[url] for url in urls}
    # Each object's first part is asked for before its size is known (a pool buffer, copied); parts that began
    # before their stream was planned, too. The rest is received where read() hands it over.
    assert client.landed_bytes - landed_before >= len(urls) * SIZE // 2
    assert all(len(piece) == PIECE for read in pieces.values() for piece in read[:-1])


def test_a_listed_object_is_received_into_its_results_from_its_first_part(  # type: ignore[no-untyped-def]
    objects: dict[str, bytes], bucket: str
) -> None:
    """A listing gives the size before the GET starts: every part can be planned, the first one too."""
    config = config_of_its_own()
    client = native_client(config)
    taught(objects, config)
    landed_before = client.landed_bytes

    loaded = {url: in_pieces(stream) for url, stream in load([f"s3://{bucket}/big/"], config)}

    assert {url: b"".join(read) for url, read in loaded.items()} == objects
    assert client.landed_bytes - landed_before >= 0.9 * len(objects) * SIZE


def opened_guessing(url: str, config: S3Config, *, guessed_length: int) -> S3ObjectStream:
    """A stream over an object of unknown size, opened as the loader opens one (with or without its guess)."""
    client, location = S3Client(config), parse_s3_url(url)
    native = client.open_native(location, guessed_length=guessed_length)
    return S3ObjectStream(ObjectReader(client, location, stream=native))


@pytest.mark.parametrize("guessed", [6 * PART, 0])
def test_an_object_guessed_to_fill_its_first_parts_is_received_into_results_from_them(
    objects: dict[str, bytes], guessed: int
) -> None:
    """Parts are asked for from offset 0 on, so their ranges are known before the object's size: on the
    loader's guess (here all of it), they are planned before it, the first one too. Without the guess, no
    first part can be (the control: it shows the counter tells the two apart)."""
    config = config_of_its_own()
    client = native_client(config)
    urls = taught(objects, config)
    landed_before = client.landed_bytes

    read = {url: b"".join(in_pieces(opened_guessing(url, config, guessed_length=guessed))) for url in urls}

    assert read == {url: objects[url] for url in urls}
    landed = client.landed_bytes - landed_before
    if guessed:
        assert landed >= 0.9 * len(urls) * SIZE
    else:
        assert landed <= len(urls) * (SIZE - PART)


def test_results_never_change_after_they_are_handed_out(objects: dict[str, bytes]) -> None:
    """Results are reused once only their planner holds them: every one kept here must stay as it was read,
    and the hash each cached before it was let go must not follow a reused one."""
    config = config_of_its_own(read_window_bytes=2 * PART)
    urls = taught(objects, config)
    kept: list[tuple[str, int, bytes]] = []
    for rounds in range(3):
        for url, stream in load(urls, config):
            offset = 0
            for piece in in_pieces(stream):
                assert hash(piece) == hash(bytes(piece))  # a stale cached hash would differ
                if (offset // PIECE) % 3 == rounds:
                    kept.append((url, offset, piece))
                offset += len(piece)
        gc.collect()

    assert kept
    for url, offset, piece in kept:
        assert piece == objects[url][offset : offset + len(piece)]


def mixed_sizes(stream: io.BufferedIOBase) -> bytes:
    head = stream.read(PIECE + 7)  # off the pieces' grid from here on: copied out of the results
    return head + b"".join(in_pieces(stream))


def lines(stream: io.BufferedIOBase) -> bytes:
    return b"".join(stream)


def chunks_kept_past_the_stream(stream: io.BufferedIOBase) -> bytes:
    first = stream.read(PIECE)
    chunks = [first, *iter(stream.read_chunk, None)]  # type: ignore[attr-defined]
    stream.close()
    gc.collect()  # the stream's own references are gone: only the chunks keep the results' memory
    return b"".join(bytes(chunk) for chunk in chunks)


def into_a_piece_sized_buffer(stream: io.BufferedIOBase) -> bytes:
    """readinto() a reused buffer of a piece (straight from the results), a short read() taking the stream off
    the grid and through its own buffer halfway."""
    out, buffer = bytearray(), bytearray(PIECE)
    while n := stream.readinto(buffer):
        out += buffer[:n]
        if len(out) == 2 * PIECE:
            out += stream.read(100)
    return bytes(out)


def read_twice_from_a_seek_back(stream: io.BufferedIOBase) -> bytes:
    once = b"".join(in_pieces(stream))
    stream.seek(PART // 2)
    return once + b"".join(in_pieces(stream))


READERS = {
    "mixed_sizes": mixed_sizes,
    "lines": lines,
    "read_chunk_kept": chunks_kept_past_the_stream,
    "readinto": into_a_piece_sized_buffer,
    "seek_back": read_twice_from_a_seek_back,
}


@pytest.mark.parametrize("reader", list(READERS))
def test_every_way_of_reading_a_scattered_object_is_exact(objects: dict[str, bytes], reader: str) -> None:
    config = config_of_its_own()
    urls = taught(objects, config)

    for url, stream in load(urls, config):
        expected = objects[url] + objects[url][PART // 2 :] if reader == "seek_back" else objects[url]
        assert READERS[reader](stream) == expected, url


def test_the_loader_guesses_from_the_objects_before(objects: dict[str, bytes]) -> None:
    """Objects of unknown size after large ones: the loader's guess lets their first parts be received into
    results too (without it, at most all but each first part could be: the bound asserted against)."""
    config = config_of_its_own()
    client = native_client(config)
    urls = taught(objects, config) * 3
    landed_before = client.landed_bytes

    read = [(url, b"".join(in_pieces(stream))) for url, stream in load(urls, config)]

    assert read == [(url, objects[url]) for url in urls]
    assert client.landed_bytes - landed_before > len(urls) * (SIZE - PART)


# Shorter than the guess of three parts (the blocks past the end go unused), on the pieces' grid and off it,
# ending in each of the parts, and as long.
GUESS = 3 * PART
SHORTER_OR_AS_LONG = [0, 1, PIECE - 1, PIECE, 3 * PIECE + 5, PART - 1, PART, PART + 1, 2 * PART + 5, GUESS]


@pytest.mark.parametrize("reader", ["pieces", *READERS])
def test_a_wrong_guess_reads_every_object_exactly(boto_s3, bucket: str, reader: str) -> None:  # type: ignore[no-untyped-def]
    config = config_of_its_own()
    stored = {f"s3://{bucket}/short/{size}": payload(size, size) for size in SHORTER_OR_AS_LONG}
    for url, data in stored.items():
        boto_s3.put_object(Bucket=bucket, Key=url.split("/", 3)[3], Body=data)
    teacher = f"s3://{bucket}/short/teacher"
    boto_s3.put_object(Bucket=bucket, Key="short/teacher", Body=payload(99))
    assert b"".join(in_pieces(opened_guessing(teacher, config, guessed_length=0))) == payload(99)

    client = native_client(config)
    landed_before = client.landed_bytes
    for url, data in stored.items():
        stream = opened_guessing(url, config, guessed_length=GUESS)
        if reader == "pieces":
            assert b"".join(in_pieces(stream)) == data, url
        else:
            expected = data + data[PART // 2 :] if reader == "seek_back" else data
            assert READERS[reader](stream) == expected, url
    if reader == "pieces":  # (other readers teach the client other sizes: later objects are not planned)
        # Every byte was received into a planned result, the first parts' too (without the guess: a third).
        assert client.landed_bytes - landed_before >= 0.9 * sum(SHORTER_OR_AS_LONG)


def test_the_last_piece_is_the_rest_and_then_nothing(objects: dict[str, bytes]) -> None:
    config = config_of_its_own()
    urls = taught(objects, config)
    [(url, stream)] = list(load(urls[:1], config))

    read = in_pieces(stream, piece=PART)  # a larger piece that also divides a part
    assert [len(piece) for piece in read] == [PART] * 5 + [1234]
    assert stream.read(PART) == b""
    assert b"".join(read) == objects[url]


def later_part(request: ProxiedRequest) -> bool:
    """A GET of a part after the first (the CRT sends those with If-Match)."""
    return request.is_get_object and "if-match" in request.headers


def first_part(request: ProxiedRequest) -> bool:
    """A GET of an object's first part (asked for before its size is known: no If-Match)."""
    return request.is_get_object and "if-match" not in request.headers


@pytest.mark.parametrize("cut", ["later parts", "first parts"])
def test_bodies_cut_short_are_received_again_into_their_results(  # type: ignore[no-untyped-def]
    objects: dict[str, bytes], proxy: FaultProxy, cut: str
) -> None:
    """Later parts planned once the size came (the loader), or first parts planned on a guess before it."""
    config = config_of_its_own(endpoint_url=proxy.endpoint_url)
    client = native_client(config)
    urls = taught(objects, config)
    landed_before = client.landed_bytes
    if cut == "later parts":
        cuts = 4
        proxy.force(Fault.CUT_BODY, cuts, eligible=later_part)
        read = {url: b"".join(in_pieces(stream)) for url, stream in load(urls, config)}
        landed_at_least = len(urls) * SIZE // 2  # the first parts are not planned here
    else:
        cuts = 3
        proxy.force(Fault.CUT_BODY, cuts, eligible=first_part)
        read = {url: b"".join(in_pieces(opened_guessing(url, config, guessed_length=GUESS))) for url in urls}
        landed_at_least = int(0.9 * len(urls) * SIZE)  # the retried first parts too

    assert read == {url: objects[url] for url in urls}
    assert proxy.injected == {Fault.CUT_BODY: cuts}
    assert client.landed_bytes - landed_before >= landed_at_least


@pytest.mark.parametrize("how", ["closed", "dropped"])
def test_a_stream_given_up_while_its_parts_arrive_lets_the_client_read_on(  # type: ignore[no-untyped-def]
    objects: dict[str, bytes], proxy: FaultProxy, how: str
) -> None:
    """Later parts stalled mid-body: CRT connections are still writing into planned results when the reader
    gives the stream up. Closing or dropping must end those writes before the results are freed or reused."""
    config = config_of_its_own(endpoint_url=proxy.endpoint_url, request_timeout_ms=20_000)
    urls = taught(objects, config)
    proxy.force(Fault.STALL_BODY, 3, eligible=later_part)
    started = time.monotonic()

    streams = list(load(urls, config))
    kept = [stream.read(PIECE) for _url, stream in streams]
    give_up(streams, how)

    assert time.monotonic() - started < 15  # cancelled, not waited out (the proxy stalls for 30 s)
    assert kept == [objects[url][:PIECE] for url in urls]
    proxy.forget_forced()
    assert {url: b"".join(in_pieces(stream)) for url, stream in load(urls, config)} == {
        url: objects[url] for url in urls
    }


def test_turned_off_nothing_is_received_into_results(objects: dict[str, bytes]) -> None:
    """The switch the benchmark's unscattered variant uses; also shows the counter above counts this path."""
    config = config_of_its_own()
    client = native_client(config)
    urls = taught(objects, config)
    _core.set_scattered_reads(False)
    try:
        landed_before = client.landed_bytes
        assert {url: b"".join(in_pieces(stream)) for url, stream in load(urls, config)} == {
            url: objects[url] for url in urls
        }
        # Only a last piece's read of "all that is left" still lands (a part not begun yet, in its result).
        assert client.landed_bytes - landed_before <= len(urls) * PIECE
    finally:
        _core.set_scattered_reads(True)
