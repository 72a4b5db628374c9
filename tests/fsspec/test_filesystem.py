"""torchdata_s3.fsspec.S3FileSystem on a real S3-protocol server: fsspec's entry points, s3fs's options and
answers, concurrent ranges, the libraries that read through fsspec, and forked DataLoader workers."""

from __future__ import annotations

import datetime
import random
import subprocess
import sys
import textwrap

import fsspec
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from tests.conftest import TEST_ACCESS_KEY, TEST_SECRET_KEY
from torchdata_s3.fsspec import S3FileSystem
from torchdata_s3.fsspec.ranges import merge_ranges


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
    with pytest.raises(ValueError, match="requester_pays=True is not supported"):
        S3FileSystem(requester_pays=True, skip_instance_cache=True, **options)


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
    assert len([line for line in sent if line.startswith("DELETE ")]) <= 32 + 3  # files, and the directories
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


def test_find_lists_every_page_of_a_large_prefix(fs: S3FileSystem, boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    from concurrent.futures import ThreadPoolExecutor

    keys = [f"many/{i // 100:02d}/{i:05d}" for i in range(2100)]  # three pages, in parallel key ranges
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda key: boto_s3.put_object(Bucket=bucket, Key=key, Body=b"x"), keys))
    assert fs.find(f"{bucket}/many") == [f"{bucket}/{key}" for key in sorted(keys)]
    detailed = fs.find(f"s3crt://{bucket}/many/", detail=True)
    assert list(detailed) == [f"{bucket}/{key}" for key in sorted(keys)]
    assert {entry["size"] for entry in detailed.values()} == {1}


def test_copy_is_server_side(fs: S3FileSystem, bucket: str, moto_server) -> None:  # type: ignore[no-untyped-def]
    data = payload(300_000, seed=9)
    fs.pipe_file(f"{bucket}/src/one", data)
    before = len(moto_server.logged_requests())
    fs.copy(f"s3crt://{bucket}/src/one", f"{bucket}/dst/one")
    sent = moto_server.logged_requests()[before:]
    assert fs.cat_file(f"{bucket}/dst/one") == data
    assert not [line for line in sent if line.startswith("GET /" + bucket + "/src")], sent
