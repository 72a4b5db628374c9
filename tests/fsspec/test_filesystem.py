"""torchdata_s3.fsspec.S3FileSystem on a real S3-protocol server: fsspec's entry points, s3fs's options and
answers, concurrent ranges, the libraries that read through fsspec, and forked DataLoader workers."""

from __future__ import annotations

import datetime
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import fsspec
import pytest
import torch
from fsspec.callbacks import Callback
from torch.utils.data import DataLoader, Dataset

from tests.conftest import TEST_ACCESS_KEY, TEST_SECRET_KEY
from torchdata_s3 import S3Config
from torchdata_s3.fsspec import S3FileSystem
from torchdata_s3.fsspec.filesystem import LISTINGS_EXPIRY_SECONDS
from torchdata_s3.fsspec.ranges import merge_ranges

MiB = 1024 * 1024


@pytest.fixture
def options(s3_endpoint: str) -> dict:
    """storage_options as code written for s3fs passes them."""
    return {"key": TEST_ACCESS_KEY, "secret": TEST_SECRET_KEY, "client_kwargs": {"endpoint_url": s3_endpoint}}


@pytest.fixture
def fs(options: dict) -> S3FileSystem:
    return S3FileSystem(skip_instance_cache=True, **options)


def payload(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


# ---- found by fsspec, with s3fs's options ------------------------------------------------------------------


def test_s3crt_urls_reach_this_file_system_through_the_entry_point(options: dict, bucket: str) -> None:
    assert fsspec.get_filesystem_class("s3crt") is S3FileSystem
    with fsspec.open(f"s3crt://{bucket}/a/b.bin", "wb", **options) as f:
        f.write(b"written through fsspec.open")
    with fsspec.open(f"s3crt://{bucket}/a/b.bin", "rb", **options) as f:
        assert f.read() == b"written through fsspec.open"
    with fsspec.open(f"s3crt://{bucket}/a/b.bin", "rt", **options) as f:
        assert f.read() == "written through fsspec.open"


def test_s3_urls_stay_s3fs_until_register_s3_is_called(s3_endpoint: str, bucket: str) -> None:
    # In a process of its own: the registration is process-wide and would reach other tests.
    script = textwrap.dedent(
        f"""
        import fsspec, torchdata_s3.fsspec as ours
        before = fsspec.get_filesystem_class("s3")
        assert before.__module__.startswith("s3fs"), before
        ours.register_s3()
        assert fsspec.get_filesystem_class("s3") is ours.S3FileSystem
        assert fsspec.get_filesystem_class("s3a") is ours.S3FileSystem
        fs = fsspec.filesystem("s3", key={TEST_ACCESS_KEY!r}, secret={TEST_SECRET_KEY!r},
                               client_kwargs={{"endpoint_url": {s3_endpoint!r}}})
        fs.pipe_file("s3://{bucket}/k", b"v")
        assert fs.cat_file("s3a://{bucket}/k") == b"v"
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)


def test_an_unknown_storage_option_is_refused_with_the_accepted_ones(options: dict) -> None:
    with pytest.raises(TypeError, match=r"option\(s\) endpoint for .*; accepted: .*endpoint_url"):
        S3FileSystem(endpoint="http://127.0.0.1:1", skip_instance_cache=True)
    with pytest.raises(TypeError, match=r"unknown client_kwargs key\(s\) endpoint; accepted: endpoint_url"):
        S3FileSystem(client_kwargs={"endpoint": "x"}, skip_instance_cache=True)


def test_info_and_ls_answer_with_s3fs_keys(fs: S3FileSystem, bucket: str) -> None:
    fs.pipe_file(f"{bucket}/dir/one", b"1")
    fs.pipe_file(f"{bucket}/dir/sub/two", b"22")
    info = fs.info(f"s3crt://{bucket}/dir/sub/two")
    assert {k: info[k] for k in ("name", "size", "type")} == {
        "name": f"{bucket}/dir/sub/two",
        "size": 2,
        "type": "file",
    }
    assert info["ETag"].strip('"')
    # LastModified as botocore gives it (an aware datetime), from HeadObject and from listings alike.
    now = datetime.datetime.now(datetime.timezone.utc)
    assert abs((info["LastModified"] - now).total_seconds()) < 120 and info["StorageClass"] == "STANDARD"
    assert fs.modified(f"{bucket}/dir/sub/two") == info["LastModified"]
    [listed] = [e for e in fs.ls(f"{bucket}/dir/sub") if e["type"] == "file"]
    assert abs((listed["LastModified"] - info["LastModified"]).total_seconds()) < 2
    assert listed["StorageClass"] == "STANDARD"
    found = fs.find(bucket, detail=True)
    assert found[f"{bucket}/dir/one"]["LastModified"] is not None and found[f"{bucket}/dir/one"]["size"] == 1
    assert fs.info(f"{bucket}/dir")["type"] == "directory"
    assert fs.info(bucket)["type"] == "directory"
    assert fs.ls(f"{bucket}/dir", detail=False) == [f"{bucket}/dir/one", f"{bucket}/dir/sub"]
    assert [e["type"] for e in fs.ls(f"{bucket}/dir")] == ["file", "directory"]
    assert fs.ls(f"{bucket}/dir/one", detail=False) == [f"{bucket}/dir/one"]
    assert fs.find(bucket) == [f"{bucket}/dir/one", f"{bucket}/dir/sub/two"]
    assert fs.find(bucket, withdirs=True) == [
        f"{bucket}/dir",
        f"{bucket}/dir/one",
        f"{bucket}/dir/sub",
        f"{bucket}/dir/sub/two",
    ]
    assert fs.isdir(f"{bucket}/dir/sub") and fs.isfile(f"{bucket}/dir/one")


def test_missing_paths_raise_fsspec_errors_that_name_them(fs: S3FileSystem, bucket: str) -> None:
    with pytest.raises(FileNotFoundError, match=f"{bucket}/nothing"):
        fs.info(f"{bucket}/nothing")
    with pytest.raises(FileNotFoundError, match=f"{bucket}/nothing"):
        fs.cat_file(f"{bucket}/nothing")
    with pytest.raises(FileNotFoundError, match="no-such-bucket-here"):
        fs.ls("no-such-bucket-here/x")
    with pytest.raises(FileNotFoundError, match=f"{bucket}/nothing"):
        fs.open(f"{bucket}/nothing").read()
    assert not fs.exists(f"{bucket}/nothing")


def test_create_modes_refuse_an_existing_object(fs: S3FileSystem, bucket: str) -> None:
    fs.pipe_file(f"{bucket}/k", b"first")
    with pytest.raises(FileExistsError, match=f"{bucket}/k"):
        fs.open(f"{bucket}/k", "xb")
    with pytest.raises(FileExistsError):
        fs.pipe_file(f"{bucket}/k", b"second", mode="create")
    assert fs.cat_file(f"{bucket}/k") == b"first"
    with pytest.raises(ValueError, match="no append"):
        fs.open(f"{bucket}/k", "ab")


# ---- bulk reads ------------------------------------------------------------------------------------------


def test_cat_ranges_matches_slicing_for_every_kind_of_range(fs: S3FileSystem, bucket: str) -> None:
    data = payload(3 * 1024 * 1024 + 17, seed=1)
    other = payload(5000, seed=2)
    fs.pipe_file(f"{bucket}/big", data)
    fs.pipe_file(f"{bucket}/small", other)
    rng = random.Random(3)
    cases = [
        (0, 10),
        (None, 5),
        (-100, None),
        (-100, -10),
        (len(data) - 5, len(data) + 100),
        (len(data) + 5, None),
    ]
    cases += [
        (start, start + rng.randrange(0, 70000)) for start in (rng.randrange(len(data)) for _ in range(200))
    ]
    paths = [f"{bucket}/big"] * len(cases) + [f"s3crt://{bucket}/small", f"{bucket}/small"]
    starts = [c[0] for c in cases] + [100, 4000]
    ends = [c[1] for c in cases] + [200, None]
    got = fs.cat_ranges(paths, starts, ends)
    expected = [data[slice(s, e)] for s, e in cases] + [other[100:200], other[4000:]]
    assert got == expected


def test_nearby_ranges_are_one_get_and_far_ones_are_not(fs: S3FileSystem, bucket: str, moto_server) -> None:  # type: ignore[no-untyped-def]
    data = payload(4 * 1024 * 1024, seed=4)
    fs.pipe_file(f"{bucket}/obj", data)
    starts = [*range(0, 1024 * 1024, 64 * 1024), 3 * 1024 * 1024]
    ends = [s + 1000 for s in starts]
    before = len(moto_server.logged_requests())
    got = fs.cat_ranges([f"{bucket}/obj"] * len(starts), starts, ends)
    gets = [r for r in moto_server.logged_requests()[before:] if r.startswith("GET ")]
    assert got == [data[s:e] for s, e in zip(starts, ends)]
    assert len(gets) == 2, gets  # the 16 ranges within 1 MiB as one, the far one alone
    spans, placements = merge_ranges([("p", 0, 10), ("p", 5, 20), ("p", 30, 40)], max_gap=5)
    assert spans == [("p", 0, 20), ("p", 30, 40)]
    assert placements == [(0, 0), (0, 5), (1, 0)]


def test_cat_of_many_paths_returns_each_objects_bytes(fs: S3FileSystem, bucket: str) -> None:
    blobs = {f"{bucket}/many/{i:03d}": payload(1000 + i, seed=i) for i in range(50)}
    for path, blob in blobs.items():
        fs.pipe_file(path, blob)
    assert fs.cat(list(blobs)) == blobs
    assert fs.cat(f"{bucket}/many", recursive=True) == blobs
    with pytest.raises(FileNotFoundError):
        fs.cat([*blobs, f"{bucket}/many/missing"])
    assert fs.cat([*blobs, f"{bucket}/many/missing"], on_error="omit") == blobs


def test_rm_removes_files_under_a_prefix_and_nothing_else(fs: S3FileSystem, bucket: str, moto_server) -> None:  # type: ignore[no-untyped-def]
    names = ["d/a", "d/e/b", "dd/c", *(f"d/many/{i:02d}" for i in range(30))]
    for name in names:
        fs.pipe_file(f"{bucket}/{name}", b"x")
    before = len(moto_server.logged_requests())
    fs.rm(f"{bucket}/d", recursive=True)
    sent = moto_server.logged_requests()[before:]
    assert fs.find(bucket) == [f"{bucket}/dd/c"]
    # fsspec's expand_path asks about the root once; no request asks what each name is.
    assert len([line for line in sent if line.startswith("HEAD ")]) <= 1, sent
    # One DeleteObjects request for the 32 files and the directories' own names.
    assert [line.split()[0] for line in sent if "delete" in line or line.startswith("DELETE ")] == ["POST"], (
        sent
    )
    fs.rm(f"{bucket}/dd/c")
    assert fs.find(bucket) == []


# ---- what users read through it ---------------------------------------------------------------------------


def test_pandas_csv_and_parquet_round_trip_through_s3crt_urls(options: dict, bucket: str) -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"x": range(1000), "y": [f"row {i}" for i in range(1000)]})
    frame.to_csv(f"s3crt://{bucket}/t.csv", index=False, storage_options=options)
    pd.testing.assert_frame_equal(pd.read_csv(f"s3crt://{bucket}/t.csv", storage_options=options), frame)
    frame.to_parquet(f"s3crt://{bucket}/t.parquet", storage_options=options)
    pd.testing.assert_frame_equal(
        pd.read_parquet(f"s3crt://{bucket}/t.parquet", storage_options=options), frame
    )


def test_pyarrow_reads_a_hive_partitioned_dataset_and_fsspec_parquet_opens_a_column(
    fs: S3FileSystem, bucket: str
) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq
    from fsspec.parquet import open_parquet_file

    for year in (2023, 2024):
        table = pa.table({"v": list(range(year, year + 100)), "w": [float(i) for i in range(100)]})
        with fs.open(f"{bucket}/data/year={year}/part-0.parquet", "wb") as f:
            pq.write_table(table, f, row_group_size=25)
    dataset = ds.dataset(f"{bucket}/data", filesystem=fs, format="parquet", partitioning="hive")
    read = dataset.to_table(filter=ds.field("year") == 2024)
    assert read.num_rows == 100 and read.column("v").to_pylist() == list(range(2024, 2124))
    with open_parquet_file(f"{bucket}/data/year=2023/part-0.parquet", fs=fs, columns=["w"]) as f:
        assert pq.read_table(f, columns=["w"]).column("w").to_pylist() == [float(i) for i in range(100)]


def test_get_mapper_is_a_mutable_mapping_over_keys(fs: S3FileSystem, bucket: str) -> None:
    mapping = fs.get_mapper(f"{bucket}/store")
    mapping["a/b"] = b"1"
    mapping["c"] = b"22"
    assert dict(mapping) == {"a/b": b"1", "c": b"22"}
    del mapping["c"]
    assert list(mapping) == ["a/b"]


class _Objects(Dataset):
    def __init__(self, fs: S3FileSystem, paths: list[str]) -> None:
        self.fs = fs
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.frombuffer(bytearray(self.fs.cat_file(self.paths[index])), dtype=torch.uint8)


# The issue asks for 4 workers; torch warns that this machine has 2 cores.
@pytest.mark.filterwarnings("ignore:This DataLoader will create 4 worker processes:UserWarning")
def test_a_file_system_made_in_the_parent_serves_forked_dataloader_workers(
    fs: S3FileSystem, bucket: str
) -> None:
    blobs = [payload(20_000 + i, seed=100 + i) for i in range(32)]
    paths = [f"{bucket}/w/{i:02d}" for i in range(len(blobs))]
    for path, blob in zip(paths, blobs):
        fs.pipe_file(path, blob)
    assert fs.cat_file(paths[0]) == blobs[0]  # the parent's native client exists before the fork
    loader = DataLoader(
        _Objects(fs, paths), batch_size=None, num_workers=4, multiprocessing_context="fork", timeout=120
    )
    assert [bytes(t.numpy()) for t in loader] == blobs


def test_find_lists_every_page_of_a_large_prefix(fs: S3FileSystem, boto_s3, bucket: str, moto_server) -> None:  # type: ignore[no-untyped-def]
    from concurrent.futures import ThreadPoolExecutor

    keys = [f"many/{i // 100:02d}/{i:05d}" for i in range(2100)]  # three pages, in parallel key ranges
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda key: boto_s3.put_object(Bucket=bucket, Key=key, Body=b"x"), keys))
    assert fs.find(f"{bucket}/many") == [f"{bucket}/{key}" for key in sorted(keys)]
    before = len(moto_server.logged_requests())
    detailed = fs.find(f"s3crt://{bucket}/many/", detail=True)
    assert list(detailed) == [f"{bucket}/{key}" for key in sorted(keys)]
    assert {entry["size"] for entry in detailed.values()} == {1}
    assert all(entry["StorageClass"] == "STANDARD" for entry in detailed.values())
    assert all(isinstance(entry["LastModified"], datetime.datetime) for entry in detailed.values())
    # The details came through the parallel listing too: more than the three pages of one after another.
    listings = [
        r for r in moto_server.logged_requests()[before:] if r.startswith("GET ") and "list-type=2" in r
    ]
    assert len(listings) > 3, listings


def test_copy_is_server_side(fs: S3FileSystem, bucket: str, moto_server) -> None:  # type: ignore[no-untyped-def]
    data = payload(300_000, seed=9)
    fs.pipe_file(f"{bucket}/src/one", data)
    before = len(moto_server.logged_requests())
    fs.copy(f"s3crt://{bucket}/src/one", f"{bucket}/dst/one")
    sent = moto_server.logged_requests()[before:]
    assert fs.cat_file(f"{bucket}/dst/one") == data
    assert not [line for line in sent if line.startswith("GET /" + bucket + "/src")], sent


# ---- listing cache ----------------------------------------------------------------------------------------


def test_listings_are_cached_and_every_own_write_shows_at_once(
    fs: S3FileSystem, bucket: str, boto_s3, moto_server
) -> None:  # type: ignore[no-untyped-def]
    fs.pipe({f"{bucket}/c/a": b"1", f"{bucket}/c/sub/b": b"22"})
    listed = fs.ls(f"{bucket}/c")
    before = len(moto_server.logged_requests())
    assert fs.ls(f"{bucket}/c") == listed
    assert fs.info(f"{bucket}/c/a")["size"] == 1 and fs.isdir(f"{bucket}/c/sub")
    assert moto_server.logged_requests()[before:] == []  # all from the cached listing

    # Each of our own writes, copies and deletes shows in the next listing.
    fs.pipe_file(f"{bucket}/c/new", b"333")
    assert f"{bucket}/c/new" in fs.ls(f"{bucket}/c", detail=False)
    with fs.open(f"{bucket}/c/written", "wb") as f:
        f.write(b"4444")
    assert fs.info(f"{bucket}/c/written")["size"] == 4 and f"{bucket}/c/written" in fs.ls(
        f"{bucket}/c", detail=False
    )
    fs.cp_file(f"{bucket}/c/a", f"{bucket}/c/copied")
    fs.rm_file(f"{bucket}/c/new")
    assert set(fs.ls(f"{bucket}/c", detail=False)) == {
        f"{bucket}/c/{n}" for n in ("a", "sub", "written", "copied")
    }

    # Another writer's object: the cached listing does not show it until refreshed, but nothing claims it
    # is missing and a read never trusts a cached size.
    boto_s3.put_object(Bucket=bucket, Key="c/other", Body=b"55555")
    boto_s3.put_object(Bucket=bucket, Key="c/a", Body=b"grown")
    assert f"{bucket}/c/other" not in fs.ls(f"{bucket}/c", detail=False)
    assert fs.info(f"{bucket}/c/other")["size"] == 5  # not in the cached listing: asked about
    assert fs.cat_file(f"{bucket}/c/a") == b"grown" and fs.cat_ranges([f"{bucket}/c/a"], [-2], [None]) == [
        b"wn"
    ]
    assert f"{bucket}/c/other" in fs.ls(f"{bucket}/c", detail=False, refresh=True)


def test_a_cached_listing_expires_and_the_cache_can_be_turned_off(
    options: dict, bucket: str, boto_s3
) -> None:  # type: ignore[no-untyped-def]
    boto_s3.put_object(Bucket=bucket, Key="e/a", Body=b"1")
    brief = S3FileSystem(skip_instance_cache=True, listings_expiry_time=0.2, **options)
    uncached = S3FileSystem(skip_instance_cache=True, use_listings_cache=False, **options)
    assert (
        brief.ls(f"{bucket}/e", detail=False) == uncached.ls(f"{bucket}/e", detail=False) == [f"{bucket}/e/a"]
    )
    boto_s3.put_object(Bucket=bucket, Key="e/b", Body=b"2")
    assert uncached.ls(f"{bucket}/e", detail=False) == [f"{bucket}/e/a", f"{bucket}/e/b"]
    time.sleep(0.3)
    assert brief.ls(f"{bucket}/e", detail=False) == [f"{bucket}/e/a", f"{bucket}/e/b"]
    assert (
        S3FileSystem(skip_instance_cache=True, **options).dircache.listings_expiry_time
        == LISTINGS_EXPIRY_SECONDS
    )


# ---- many files, and large ones ---------------------------------------------------------------------------


def test_put_and_get_of_many_files_and_a_multipart_one_are_byte_exact(
    options: dict, bucket: str, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    fs = S3FileSystem(
        skip_instance_cache=True,
        config=S3Config(part_size_bytes=5 * MiB, multipart_threshold_bytes=5 * MiB),
        **options,
    )
    source = tmp_path / "up"
    files = {f"d{i % 3}/f{i:02d}": payload(100 + i * 7, seed=i) for i in range(40)}
    files["big"] = payload(17 * MiB + 5, seed=99)
    files["empty"] = b""
    for name, data in files.items():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_bytes(data)
    fs.put(str(source), f"{bucket}/tree", recursive=True)
    assert {p[len(f"{bucket}/tree/") :] for p in fs.find(f"{bucket}/tree")} == set(files)
    assert fs.cat_file(f"{bucket}/tree/big") == files["big"]

    target = tmp_path / "down"
    fs.get(f"{bucket}/tree", str(target), recursive=True)
    assert {str(p.relative_to(target)) for p in target.rglob("*") if p.is_file()} == set(files)
    assert all((target / name).read_bytes() == data for name, data in files.items())

    # The first failure is raised, after every other transfer finished.
    with pytest.raises(FileNotFoundError, match=f"{bucket}/tree/missing"):
        fs.get(
            [f"{bucket}/tree/missing", f"{bucket}/tree/d0/f00"], [str(tmp_path / "m"), str(tmp_path / "f00")]
        )
    assert (tmp_path / "f00").read_bytes() == files["d0/f00"] and not (tmp_path / "m").exists()
    with pytest.raises(FileExistsError):
        fs.put_file(str(source / "big"), f"{bucket}/tree/big", mode="create")


def test_a_parquet_column_read_by_pyarrow_fetches_about_its_own_bytes(fs: S3FileSystem, bucket: str) -> None:
    pa = pytest.importorskip("pyarrow")
    import numpy as np
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)  # random doubles: no compression, each column chunk 4 MB
    table = pa.table({f"c{i}": rng.random(2_000_000) for i in range(4)})
    with fs.open(f"{bucket}/wide.parquet", "wb") as f:
        pq.write_table(table, f, row_group_size=500_000)
    metadata = pq.ParquetFile(fs.open(f"{bucket}/wide.parquet")).metadata
    column = sum(
        metadata.row_group(r).column(2).total_compressed_size for r in range(metadata.num_row_groups)
    )

    opened: list = []
    real_open = fs._open
    fs._open = lambda *args, **kwargs: opened.append(real_open(*args, **kwargs)) or opened[-1]  # type: ignore[method-assign]
    read = pq.read_table(f"{bucket}/wide.parquet", columns=["c2"], filesystem=fs)
    assert read.column("c2").equals(table.column("c2"))
    fetched = sum(stream.bytes_fetched for stream in opened)
    # The column's four 4 MB chunks, one GET each, and the footer's 1 MiB tail for each of pyarrow's opens.
    assert column <= fetched <= 1.2 * column, (fetched, column, len(opened))


class _FilesOnDisk(Callback):
    """Records, at each count, how many of the expected files are complete on disk."""

    def __init__(self, expected: dict[Path, bytes]) -> None:
        super().__init__()
        self.expected = expected
        self.complete_at_count: list[int] = []

    def relative_update(self, inc: int = 1) -> None:
        super().relative_update(inc)
        complete = sum(path.is_file() and path.read_bytes() == data for path, data in self.expected.items())
        self.complete_at_count.append(complete)


def test_get_counts_each_file_on_the_callback_when_it_has_arrived(
    fs: S3FileSystem, bucket: str, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    files = {f"f{i}": payload(50_000 + i, seed=i) for i in range(6)}
    fs.pipe({f"{bucket}/progress/{name}": data for name, data in files.items()})
    target = tmp_path / "down"
    progress = _FilesOnDisk({target / name: data for name, data in files.items()})

    fs.get(f"{bucket}/progress/", str(target) + "/", recursive=True, callback=progress)

    # fsspec counts the folder too (made locally, nothing downloaded).
    folders = progress.size - len(files)
    assert progress.value == progress.size and folders in (0, 1)
    # The n-th count comes when n files are complete, give or take the folder (fsspec's own loop counts each
    # as it starts: every count before the first file arrived).
    assert all(complete >= n - folders for n, complete in enumerate(progress.complete_at_count, start=1))


def test_put_counts_each_file_on_the_callback_when_it_was_uploaded(
    fs: S3FileSystem, bucket: str, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    source = tmp_path / "up"
    source.mkdir()
    for i in range(6):
        (source / f"f{i}").write_bytes(payload(50_000 + i, seed=i))
    uploaded_at_count: list[int] = []

    class _Uploaded(Callback):
        def relative_update(self, inc: int = 1) -> None:
            super().relative_update(inc)
            uploaded_at_count.append(len(fs.find(f"{bucket}/up-progress")))

    progress = _Uploaded()
    fs.put(str(source) + "/", f"{bucket}/up-progress/", recursive=True, callback=progress)

    folders = progress.size - 6  # fsspec counts the folder too (nothing to upload for it)
    assert progress.value == progress.size and folders in (0, 1)
    assert all(uploaded >= n - folders for n, uploaded in enumerate(uploaded_at_count, start=1))


def test_the_root_lists_the_buckets(fs: S3FileSystem, bucket: str, boto_s3) -> None:  # type: ignore[no-untyped-def]
    expected = {entry["Name"] for entry in boto_s3.list_buckets()["Buckets"]}
    assert bucket in expected

    entries = fs.ls("")
    assert {entry["name"] for entry in entries} == expected
    mine = next(entry for entry in entries if entry["name"] == bucket)
    assert (mine["type"], mine["size"], mine["StorageClass"]) == ("directory", 0, "BUCKET")
    assert isinstance(mine["CreationDate"], datetime.datetime)
    assert sorted(fs.ls("s3crt://", detail=False)) == sorted(expected)
    assert fs.info("")["type"] == "directory"
