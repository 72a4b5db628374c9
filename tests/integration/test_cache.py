"""The local object cache (torchdata_s3/cache/) against a real S3-protocol server and real files: later
epochs from disk, validation by ETag, integrity, eviction, sharing between processes, and a disk that says
no."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Union

import pytest
from torch.utils.data.datapipes.iter import IterableWrapper

from tests.fault_proxy import Fault, FaultProxy
from torchdata_s3 import S3Config, S3Error, S3FileLoader, S3FileNotFoundError, S3NetworkError
from torchdata_s3.cache import CacheUnavailableWarning, cache_info, clear_cache
from torchdata_s3.cache.entry import BLOCK_BYTES, entry_name
from torchdata_s3.cache.object_cache import main
from torchdata_s3.cache.store import VERSION_DIR, CacheStore
from torchdata_s3.client import S3Client
from torchdata_s3.reader import S3ObjectStream
from torchdata_s3.url import parse_s3_url

pytestmark = pytest.mark.integration

KiB = 1024
MiB = 1024 * KiB
PART = 256 * KiB
RETAIN = 1 * MiB
WORKER = Path(__file__).with_name("cache_worker.py")


def child_environment() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))


def payload(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


def put_dataset(boto_s3: Any, bucket: str, sizes: list[int], prefix: str = "data/") -> dict[str, bytes]:
    objects = {}
    for number, size in enumerate(sizes):
        key = f"{prefix}{number:03d}.bin"
        objects[f"s3://{bucket}/{key}"] = payload(size, seed=number + size)
        boto_s3.put_object(Bucket=bucket, Key=key, Body=objects[f"s3://{bucket}/{key}"])
    return objects


def temp_files(cache_dir: Path) -> list[Path]:
    """Entries being written (or left by a writer that died), in the temp folders."""
    return sorted(p for p in (cache_dir / VERSION_DIR / "tmp").rglob("*") if p.is_file())


def epoch(
    inputs: list[str], cache_dir: Path, piece: Union[int, str, None] = None, **options: Any
) -> dict[str, tuple[bytes, int, Any]]:
    """Reads every object, whole, in pieces of `piece` bytes or line by line (``"lines"``): ``{url: (bytes,
    bytes fetched from S3, stream type)}``."""
    options = {"part_size_bytes": PART, "retain_bytes": RETAIN, **options}
    results = {}
    for url, stream in S3FileLoader(IterableWrapper(inputs), cache_dir=str(cache_dir), **options):
        if piece is None:
            data = stream.read()
        elif piece == "lines":
            data = b"".join(stream)
        else:
            data = b"".join(iter(functools.partial(stream.read, piece), b""))
        results[url] = (data, stream.bytes_fetched, type(stream.file_obj))
        stream.close()
    return results


def entry_files(cache_dir: Path) -> list[Path]:
    return sorted(p for p in (cache_dir / VERSION_DIR / "entries").glob("*/*") if p.suffix != ".lock")


SIZES = [1, 1000, PART - 1, PART + 1, 3 * PART + 5, RETAIN + 7, 3 * MiB + 1]


# Pieces of a part: the parts are received straight into read()'s results, which must reach the cache too;
# lines: iterating a stream cuts them natively, except where the cache must see the bytes.
@pytest.mark.parametrize("piece", [None, PART, "lines"], ids=["whole", "pieces", "lines"])
@pytest.mark.parametrize("listed", [True, False], ids=["listing", "urls"])
def test_second_epoch_comes_from_disk_byte_exact(  # type: ignore[no-untyped-def]
    boto_s3, bucket: str, tmp_path: Path, listed: bool, piece: Union[int, str, None]
) -> None:
    objects = put_dataset(boto_s3, bucket, SIZES)
    inputs = [f"s3://{bucket}/data/"] if listed else list(objects)
    first = epoch(inputs, tmp_path, piece)
    assert {url: got[0] for url, got in first.items()} == objects
    assert sum(got[1] for got in first.values()) >= sum(map(len, objects.values()))
    assert len(entry_files(tmp_path)) == len(objects)
    second = epoch(inputs, tmp_path, piece)
    assert {url: got[0] for url, got in second.items()} == objects
    assert all(got[1] == 0 for got in second.values()), "a cached object was fetched again"
    assert all(got[2] is S3ObjectStream for got in second.values())
    stats = cache_info(str(tmp_path))
    assert (stats.entries, stats.bytes >= sum(map(len, objects.values()))) == (len(objects), True)
    assert (stats.hits, stats.misses) == (len(objects), len(objects))


def test_cached_streams_seek_like_files(boto_s3, bucket: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    objects = put_dataset(boto_s3, bucket, [5000, 2 * MiB + 3])  # one served from memory, one from the file
    epoch([f"s3://{bucket}/data/"], tmp_path)
    for url, stream in S3FileLoader(IterableWrapper([f"s3://{bucket}/data/"]), cache_dir=str(tmp_path)):
        data = objects[url]
        assert stream.seekable() and stream.size == len(data) and stream.etag
        assert stream.seek(-100, 2) == len(data) - 100
        assert stream.read() == data[-100:]
        stream.seek(7)
        assert stream.read(1000) == data[7:1007]
        assert stream.tell() == 1007
        chunk = stream.read_chunk()
        assert chunk is not None and bytes(chunk) == data[1007 : 1007 + len(chunk)]
        stream.seek(0)
        first_line = data[: data.index(b"\n") + 1] if b"\n" in data else data
        assert stream.readline() == first_line
        assert stream.bytes_fetched == 0
        stream.close()


@pytest.mark.parametrize("listed", [True, False], ids=["listing", "urls"])
def test_an_overwritten_object_is_never_served_from_the_cache(
    boto_s3, bucket: str, tmp_path: Path, listed: bool
) -> None:  # type: ignore[no-untyped-def]
    objects = put_dataset(boto_s3, bucket, [PART, 2 * MiB])
    inputs = [f"s3://{bucket}/data/"] if listed else list(objects)
    epoch(inputs, tmp_path)
    new = {url: payload(len(data), seed=99 + len(data)) for url, data in objects.items()}  # same sizes
    for url, data in new.items():
        boto_s3.put_object(Bucket=bucket, Key=url.split("/", 3)[3], Body=data)
    second = epoch(inputs, tmp_path)
    assert {url: got[0] for url, got in second.items()} == new
    assert all(got[1] >= len(new[url]) for url, got in second.items())
    third = epoch(inputs, tmp_path)  # the refreshed entries serve the new version
    assert {url: got[0] for url, got in third.items()} == new
    assert all(got[1] == 0 for got in third.values())


@pytest.mark.parametrize("damage", ["truncate", "flip-data", "flip-footer", "empty"])
def test_a_damaged_entry_is_discarded_and_fetched_again(
    boto_s3, bucket: str, tmp_path: Path, damage: str
) -> None:  # type: ignore[no-untyped-def]
    objects = put_dataset(boto_s3, bucket, [3000, 2 * MiB + 1])
    inputs = [f"s3://{bucket}/data/"]
    epoch(inputs, tmp_path)
    for path in entry_files(tmp_path):
        raw = bytearray(path.read_bytes())
        if damage == "truncate":
            raw = raw[: len(raw) // 2]
        elif damage == "flip-data":
            raw[len(raw) // 3] ^= 0x01
        elif damage == "flip-footer":
            raw[-20] ^= 0x01
        else:
            raw = bytearray()
        path.write_bytes(bytes(raw))
    second = epoch(inputs, tmp_path)
    assert {url: got[0] for url, got in second.items()} == objects
    assert all(got[1] >= len(objects[url]) for url, got in second.items()), "a damaged entry was served"
    third = epoch(inputs, tmp_path)
    assert {url: got[0] for url, got in third.items()} == objects
    assert all(got[1] == 0 for got in third.values())


def test_an_entry_damaged_while_it_is_read_never_hands_over_a_bad_byte(
    boto_s3, bucket: str, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """Blocks are checked as they are read: a block damaged after the stream opened is caught before any of
    its bytes are returned, and the rest of the object comes from S3 (the same version)."""
    [(url, data)] = put_dataset(boto_s3, bucket, [3 * BLOCK_BYTES + 5]).items()
    epoch([url], tmp_path)
    [path] = entry_files(tmp_path)
    [(_url, stream)] = list(S3FileLoader(IterableWrapper([url]), cache_dir=str(tmp_path)))
    assert stream.read(BLOCK_BYTES + 10) == data[: BLOCK_BYTES + 10] and stream.bytes_fetched == 0
    with open(path, "r+b") as entry:  # the same file the stream has open
        entry.seek(2 * BLOCK_BYTES + 100)
        entry.write(bytes([data[2 * BLOCK_BYTES + 100] ^ 0xFF]))
    assert stream.read() == data[BLOCK_BYTES + 10 :], "a damaged block reached the reader"
    assert 0 < stream.bytes_fetched < len(data)  # the rest, from S3
    stream.seek(0)
    assert stream.read(100) == data[:100]
    stream.close()
    assert entry_files(tmp_path) == [], "the damaged entry was kept"


def test_a_stream_not_read_to_the_end_leaves_no_entry(boto_s3, bucket: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    put_dataset(boto_s3, bucket, [2 * MiB])
    for _url, stream in S3FileLoader(IterableWrapper([f"s3://{bucket}/data/"]), cache_dir=str(tmp_path)):
        stream.read(MiB)
        stream.close()
    assert entry_files(tmp_path) == []
    assert temp_files(tmp_path) == []


def test_objects_larger_than_the_budget_are_read_through(boto_s3, bucket: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    objects = put_dataset(boto_s3, bucket, [1000, 2 * MiB])
    for inputs in ([f"s3://{bucket}/data/"], list(objects)):  # size known from the listing, then not
        clear_cache(str(tmp_path))
        got = epoch(inputs, tmp_path, cache_max_bytes=MiB)
        assert {url: g[0] for url, g in got.items()} == objects
        assert [p.stat().st_size < MiB for p in entry_files(tmp_path)] == [True]


def test_least_recently_used_entries_are_evicted_even_while_read(
    boto_s3, bucket: str, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    objects = put_dataset(boto_s3, bucket, [2 * MiB, 2 * MiB, 2 * MiB])
    urls = list(objects)
    budget = 5 * MiB  # two entries fit, three do not
    epoch(urls[:2], tmp_path, cache_max_bytes=budget)
    # Open the first entry (larger than retain_bytes: read from its file, not memory) and read part of it.
    loader = iter(
        S3FileLoader(
            IterableWrapper(urls[:1]), cache_dir=str(tmp_path), cache_max_bytes=budget, retain_bytes=RETAIN
        )
    )
    url, held = next(loader)
    assert held.read(1000) == objects[url][:1000] and held.bytes_fetched == 0
    held_entry = CacheStore(str(tmp_path), budget).entry_path(entry_name(bucket, "data/000.bin"))
    os.utime(held_entry, (1, 1))  # make entry 0 the least recently used, whatever the clock
    # The third object evicts what is least recently used: entry 0, which `held` is reading.
    epoch(urls[2:], tmp_path, cache_max_bytes=budget)
    assert cache_info(str(tmp_path)).bytes <= budget
    held.seek(0)
    assert held.read() == objects[url], "eviction pulled bytes from under a reader"
    held.close()
    with pytest.raises(StopIteration):
        next(loader)
    again = epoch(urls, tmp_path, cache_max_bytes=budget)
    assert {u: g[0] for u, g in again.items()} == objects


def _mount_tmpfs(path: Path, size: str) -> bool:
    path.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, check=False
    )
    return done.returncode == 0


def test_a_full_disk_degrades_to_s3_with_one_warning(boto_s3, bucket: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    objects = put_dataset(boto_s3, bucket, [MiB, MiB, MiB, MiB, MiB])
    disk = tmp_path / "small-disk"
    if not _mount_tmpfs(disk, "2m"):
        pytest.skip("mounting a tmpfs is not allowed here; see test_a_file_size_limit_degrades_to_s3")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = epoch([f"s3://{bucket}/data/"], disk, cache_max_bytes=100 * MiB)
        assert {url: g[0] for url, g in got.items()} == objects
        refused = [w for w in caught if issubclass(w.category, CacheUnavailableWarning)]
        assert len(refused) == 1 and "cannot be written" in str(refused[0].message)
        assert not temp_files(disk), "a partial entry was left on the full disk"
        assert 1 <= len(entry_files(disk)) < len(objects)
        second = epoch([f"s3://{bucket}/data/"], disk, cache_max_bytes=100 * MiB)  # entries that fit serve
        assert {url: g[0] for url, g in second.items()} == objects
    finally:
        subprocess.run(["umount", str(disk)], check=False)


def test_a_file_size_limit_degrades_to_s3(boto_s3, bucket: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The other real way to make a write fail mid-entry: RLIMIT_FSIZE (EFBIG), in a process of its own."""
    objects = put_dataset(boto_s3, bucket, [3000, 2 * MiB])
    [worker] = _run_workers(f"s3://{bucket}/data/", tmp_path, 1, mode="fsize")
    out, err = worker.communicate(timeout=120)
    assert worker.returncode == 0, err
    report = json.loads(out.splitlines()[-1])
    assert report["digests"] == {url: hashlib.sha256(data).hexdigest() for url, data in objects.items()}
    assert len(report["warnings"]) == 1 and "cannot be written" in report["warnings"][0]
    assert [p.stat().st_size < MiB for p in entry_files(tmp_path)] == [True]
    assert not temp_files(tmp_path)


def test_an_unusable_directory_degrades_to_s3_with_one_warning(boto_s3, bucket: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    objects = put_dataset(boto_s3, bucket, [3000])
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("in the way")
    with pytest.warns(CacheUnavailableWarning, match="cannot be used"):
        got = epoch([f"s3://{bucket}/data/"], not_a_directory)
    assert {url: g[0] for url, g in got.items()} == objects


def _run_workers(prefix: str, cache_dir: Path, count: int, mode: str = "all") -> list[subprocess.Popen]:
    return [
        subprocess.Popen(
            [sys.executable, str(WORKER), prefix, str(cache_dir), mode],
            env=child_environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]


def test_four_processes_share_one_cache_and_download_each_object_once(
    boto_s3, bucket: str, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    objects = put_dataset(boto_s3, bucket, [random.Random(n).randrange(1, 3 * MiB) for n in range(24)])
    expected = {url: hashlib.sha256(data).hexdigest() for url, data in objects.items()}
    workers = _run_workers(f"s3://{bucket}/data/", tmp_path, 4)
    reports = []
    for worker in workers:
        out, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err
        reports.append(json.loads(out.splitlines()[-1]))
    for report in reports:
        assert report["digests"] == expected
    assert sum(report["fetched"] for report in reports) == sum(map(len, objects.values())), (
        "some object was downloaded more than once"
    )
    assert len(entry_files(tmp_path)) == len(objects)


def test_a_process_killed_mid_write_leaves_no_entry(boto_s3, bucket: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    objects = put_dataset(boto_s3, bucket, [4 * MiB])
    [worker] = _run_workers(f"s3://{bucket}/data/", tmp_path, 1, mode="stall")
    try:
        assert worker.stdout is not None
        assert worker.stdout.readline().strip() == "reading"
        deadline = time.monotonic() + 30  # the writes' thread writes what the reader has received
        while True:
            temps = temp_files(tmp_path)
            if (len(temps) == 1 and temps[0].stat().st_size > 0) or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        assert len(temps) == 1 and temps[0].stat().st_size > 0  # mid-write
        worker.send_signal(signal.SIGKILL)
    finally:
        worker.kill()
        worker.communicate(timeout=30)
    assert entry_files(tmp_path) == []
    got = epoch([f"s3://{bucket}/data/"], tmp_path)  # the next process cleans up and fills the entry
    assert {url: g[0] for url, g in got.items()} == objects
    assert not temp_files(tmp_path)
    assert all(g[1] == 0 for g in epoch([f"s3://{bucket}/data/"], tmp_path).values())


def test_the_helper_reports_and_clears(
    boto_s3, bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    put_dataset(boto_s3, bucket, [1000, 2000])
    epoch([f"s3://{bucket}/data/"], tmp_path)
    epoch([f"s3://{bucket}/data/"], tmp_path)
    assert main([str(tmp_path)]) == 0
    assert "2 entries" in capsys.readouterr().out and cache_info(str(tmp_path)).hit_rate == 0.5
    assert main([str(tmp_path), "--clear"]) == 0
    assert "0 entries, 0 bytes; 0 hits, 0 misses" in capsys.readouterr().out


def test_the_environment_turns_the_cache_on(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TORCHDATA_S3_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TORCHDATA_S3_CACHE_MAX_BYTES", "12345")
    config = S3Config.resolve()
    assert (config.cache_dir, config.cache_max_bytes) == (str(tmp_path), 12345)
    monkeypatch.setenv("TORCHDATA_S3_CACHE_MAX_BYTES", "lots")
    with pytest.raises(ValueError, match="TORCHDATA_S3_CACHE_MAX_BYTES"):
        S3Config.resolve()


def digest_and_fetched(item: tuple) -> tuple[str, str, int]:
    url, stream = item
    try:
        return url, hashlib.sha256(stream.read()).hexdigest(), stream.bytes_fetched
    finally:
        stream.close()


def test_dataloader_workers_fill_and_share_the_cache(boto_s3, bucket: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from torch.utils.data import DataLoader

    objects = put_dataset(boto_s3, bucket, [random.Random(n).randrange(1, MiB) for n in range(12)])
    expected = {url: hashlib.sha256(data).hexdigest() for url, data in objects.items()}
    pipe = S3FileLoader(IterableWrapper([f"s3://{bucket}/data/"]), cache_dir=str(tmp_path)).map(
        digest_and_fetched
    )
    loader = DataLoader(pipe, num_workers=2, batch_size=None, multiprocessing_context="fork")
    first = [item for item in loader]  # not list(): it asks len(), which counts the prefix as one
    assert {url: digest for url, digest, _fetched in first} == expected
    assert all(fetched >= len(objects[url]) for url, _digest, fetched in first)
    second = [item for item in loader]
    assert {url: digest for url, digest, _fetched in second} == expected
    assert all(fetched == 0 for _url, _digest, fetched in second)
    stats = cache_info(str(tmp_path))
    assert (stats.entries, stats.hits, stats.misses) == (len(objects), len(objects), len(objects))


def test_the_conditional_check_asks_the_loaders_own_endpoint(boto_s3, bucket: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A cache directory shared by loaders of different endpoints confirms each entry where its loader
    reads: an endpoint that cannot be reached fails as it would without the cache, never serves the entry."""
    objects = put_dataset(boto_s3, bucket, [3000])
    epoch(list(objects), tmp_path)
    with pytest.raises(S3NetworkError):
        epoch(list(objects), tmp_path, endpoint_url="http://127.0.0.1:9", max_retries=0)
    assert all(got[1] == 0 for got in epoch(list(objects), tmp_path).values())


def test_an_entry_whose_etag_the_loader_does_not_know_is_confirmed_by_if_none_match(
    boto_s3, bucket: str, moto_server, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """Named by URL, an object's entry is confirmed by one conditional GET: 304 serves the entry; once the
    object changed, the 200 to that same request is the new version, read and cached with no second GET."""
    objects = put_dataset(boto_s3, bucket, [3000, 2 * MiB])
    urls = list(objects)
    with FaultProxy(moto_server.port) as proxy:
        options = {"endpoint_url": proxy.endpoint_url}
        epoch(urls, tmp_path, **options)
        [etag] = {record.if_none_match for record in proxy.records} or {""}
        assert etag == "", "the first epoch has nothing to confirm"
        before = len(proxy.records)
        second = epoch(urls, tmp_path, **options)
        assert {url: got[0] for url, got in second.items()} == objects
        assert all(got[1] == 0 for got in second.values())
        checks = proxy.records[before:]
        assert sorted((r.path, r.status, bool(r.if_none_match)) for r in checks) == [
            (path_of(url), 304, True) for url in urls
        ]
        assert all(r.if_none_match.startswith('"') and r.if_none_match.endswith('"') for r in checks)
        new = {url: payload(len(data), seed=7 + len(data)) for url, data in objects.items()}
        for url, data in new.items():
            boto_s3.put_object(Bucket=bucket, Key=url.split("/", 3)[3], Body=data)
        before = len(proxy.records)
        third = epoch(urls, tmp_path, **options)
        assert {url: got[0] for url, got in third.items()} == new
        assert all(got[1] == len(new[url]) for url, got in third.items()), "fetched more than once"
        first_requests = {}
        for record in proxy.records[before:]:
            first_requests.setdefault(record.path, record)
        assert all(r.if_none_match and r.status in (200, 206) for r in first_requests.values())
        before = len(proxy.records)
        fourth = epoch(urls, tmp_path, **options)  # the refreshed entries, confirmed again
        assert {url: got[0] for url, got in fourth.items()} == new
        assert [r.status for r in proxy.records[before:]] == [304] * len(urls)


def path_of(url: str) -> str:
    return "/" + url[len("s3://") :]


def test_a_deleted_object_named_by_url_is_not_served_from_the_cache(
    boto_s3, bucket: str, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    objects = put_dataset(boto_s3, bucket, [3000])
    epoch(list(objects), tmp_path)
    boto_s3.delete_object(Bucket=bucket, Key="data/000.bin")
    with pytest.raises(S3FileNotFoundError):
        epoch(list(objects), tmp_path)
    assert entry_files(tmp_path) == []


def test_the_next_listing_page_is_asked_for_while_this_pages_objects_are_served(
    boto_s3,
    bucket: str,
    moto_server,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    """Later epochs wait for the listing (its ETags confirm the entries): each page's successor is asked
    for as soon as the page arrives, so only the first page's round trip is waited for."""
    objects = put_dataset(boto_s3, bucket, [10, 20, 30, 40, 50])
    prefix = f"s3://{bucket}/data/"
    with FaultProxy(moto_server.port) as proxy:
        # One stream of pages (max_list_requests=1; in parallel, see test_parallel_listing.py).
        config = S3Config.resolve(endpoint_url=proxy.endpoint_url, max_list_requests=1)
        listing = S3Client(config).list_location(parse_s3_url(prefix), page_size=2, read_ahead=True)
        first = next(listing)
        # Nothing more is consumed: the second page is requested all the same (bounded wait).
        deadline = time.monotonic() + 10
        while len([r for r in proxy.records if "list-type=2" in r.query]) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len([r for r in proxy.records if "list-type=2" in r.query]) == 2
        rest = list(listing)
        assert [f"s3://{bucket}/{entry.key}" for entry in [first, *rest]] == sorted(objects)
        assert len([r for r in proxy.records if "list-type=2" in r.query]) == 3  # pages of 2, 2 and 1
        # Without read-ahead a page is asked for only when its objects are reached.
        before = len(proxy.records)
        plain = S3Client(config).list_location(parse_s3_url(prefix), page_size=2)
        next(plain)
        time.sleep(0.2)
        assert len(proxy.records) == before + 1
        plain.close()


def test_a_listing_page_read_ahead_that_fails_raises_after_the_objects_before_it(
    boto_s3,
    bucket: str,
    moto_server,  # type: ignore[no-untyped-def]
) -> None:
    """A page asked for ahead that fails raises when its objects would have come, not earlier."""
    put_dataset(boto_s3, bucket, [10, 20, 30])
    with FaultProxy(moto_server.port) as proxy:
        proxy.force(Fault.INTERNAL_ERROR, eligible=lambda request: "continuation-token" in request.query)
        # One stream of pages (in parallel: test_parallel_listing.py).
        config = S3Config.resolve(endpoint_url=proxy.endpoint_url, max_retries=0, max_list_requests=1)
        seen = []
        with pytest.raises(S3Error, match="ListObjectsV2"):
            for entry in S3Client(config).list_location(
                parse_s3_url(f"s3://{bucket}/data/"), page_size=2, read_ahead=True
            ):
                seen.append(entry.key)
        assert seen == ["data/000.bin", "data/001.bin"]
        assert proxy.injected[Fault.INTERNAL_ERROR] == 1


def test_writer_locks_exclude_across_descriptions_and_within_a_process(tmp_path: Path) -> None:
    """One writer per entry: a second store (as another process opens the directory) and a second stream of
    this process both see the entry locked until its writer lets go; other entries are free meanwhile."""
    first, second = CacheStore(str(tmp_path), MiB), CacheStore(str(tmp_path), MiB)
    lock = first.try_lock("bucket", "a")
    assert lock is not None
    assert first.try_lock("bucket", "a") is None  # this process, another stream
    assert second.try_lock("bucket", "a") is None  # another open of the directory
    other = second.try_lock("bucket", "b")
    assert other is not None
    lock.release()
    lock.release()  # idempotent
    again = second.try_lock("bucket", "a")
    assert again is not None
    assert first.try_lock("bucket", "a") is None
    again.release()
    other.release()
    assert not list((tmp_path / VERSION_DIR / "locks").iterdir())  # no file per entry
    # Nothing held, nothing open: the cache's file system can be unmounted while the process lives.
    open_files = [os.path.realpath(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")]
    assert str(tmp_path / VERSION_DIR / "writers.lock") not in open_files
