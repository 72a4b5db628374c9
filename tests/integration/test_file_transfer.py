"""S3Client.download_file / upload_file: the CRT moves the bytes between a local file and an object itself."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from torchdata_s3 import S3Client, S3Config, S3FileNotFoundError, S3ObjectExistsError

MiB = 1024 * 1024


@pytest.fixture
def client(s3_endpoint: str) -> S3Client:
    # 5 MiB parts (S3's smallest) so that a 17 MiB file is four parts each way.
    return S3Client(S3Config.resolve(part_size_bytes=5 * MiB, multipart_threshold_bytes=5 * MiB))


@pytest.mark.parametrize("size", [0, 1, 17 * MiB + 3])
def test_a_file_goes_up_and_comes_back_byte_exact(
    client: S3Client,
    bucket: str,
    boto_s3,
    moto_server,
    tmp_path: Path,
    size: int,  # type: ignore[no-untyped-def]
) -> None:
    data = os.urandom(size)
    source = tmp_path / "source.bin"
    source.write_bytes(data)
    before = len(moto_server.logged_requests())
    client.upload_file(source, f"s3://{bucket}/dir/obj é")
    uploaded = moto_server.logged_requests()[before:]
    assert boto_s3.get_object(Bucket=bucket, Key="dir/obj é")["Body"].read() == data
    multipart = any("?uploads" in line for line in uploaded)
    assert multipart == (size > 5 * MiB), uploaded

    target = tmp_path / "target.bin"
    before = len(moto_server.logged_requests())
    client.download_file(f"s3://{bucket}/dir/obj é", target)
    assert target.read_bytes() == data
    gets = [line for line in moto_server.logged_requests()[before:] if line.startswith("GET ")]
    assert len(gets) >= (4 if size > 5 * MiB else 1), gets  # parts fetched separately
    assert sorted(os.listdir(tmp_path)) == ["source.bin", "target.bin"]  # no partial file left behind


def test_a_failed_download_leaves_the_local_file_as_it_was(
    client: S3Client, bucket: str, tmp_path: Path
) -> None:
    target = tmp_path / "kept.bin"
    target.write_bytes(b"precious")
    with pytest.raises(S3FileNotFoundError, match=f"s3://{bucket}/missing") as raised:
        client.download_file(f"s3://{bucket}/missing", target)
    assert raised.value.url == f"s3://{bucket}/missing"
    assert target.read_bytes() == b"precious"
    assert os.listdir(tmp_path) == ["kept.bin"]


def test_bad_local_paths_are_refused_before_any_request(
    client: S3Client, bucket: str, tmp_path: Path
) -> None:
    with pytest.raises(FileNotFoundError, match="no such file"):
        client.upload_file(tmp_path / "absent", f"s3://{bucket}/k")
    with pytest.raises(IsADirectoryError, match="is a directory"):
        client.upload_file(tmp_path, f"s3://{bucket}/k")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        client.download_file(f"s3://{bucket}/k", tmp_path / "no" / "such" / "dir" / "f")
    with pytest.raises(IsADirectoryError, match="is a directory"):
        client.download_file(f"s3://{bucket}/k", tmp_path)
    with pytest.raises(IsADirectoryError, match="prefix"):
        client.download_file(f"s3://{bucket}/dir/", tmp_path / "f")


def test_upload_without_overwrite_refuses_an_existing_object(
    client: S3Client,
    bucket: str,
    boto_s3,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    boto_s3.put_object(Bucket=bucket, Key="taken", Body=b"first")
    source = tmp_path / "f"
    source.write_bytes(b"second")
    with pytest.raises(S3ObjectExistsError, match=f"s3://{bucket}/taken"):
        client.upload_file(source, f"s3://{bucket}/taken", overwrite=False)
    assert boto_s3.get_object(Bucket=bucket, Key="taken")["Body"].read() == b"first"
    client.upload_file(source, f"s3://{bucket}/new", overwrite=False)
    assert boto_s3.get_object(Bucket=bucket, Key="new")["Body"].read() == b"second"


def resident_fraction(path: Path) -> float:
    """The share of the file's pages in the page cache (mincore(2) over a read-only mapping of it)."""
    import ctypes
    import mmap

    size = path.stat().st_size
    page = mmap.PAGESIZE
    pages = -(-size // page)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    ]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    with open(path, "rb") as file:
        address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, file.fileno(), 0)
        assert address not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
        try:
            vector = ctypes.create_string_buffer(pages)
            assert libc.mincore(address, size, vector) == 0, ctypes.get_errno()
            return sum(byte & 1 for byte in vector.raw) / pages
        finally:
            libc.munmap(address, size)


@pytest.mark.parametrize("size", [0, 1, 4096, 5 * MiB, 5 * MiB + 1, 17 * MiB + 3])
@pytest.mark.parametrize("directory", ["disk", "tmpfs"])
def test_downloads_write_past_the_page_cache_and_stay_byte_exact(
    client: S3Client, bucket: str, boto_s3, tmp_path: Path, size: int, directory: str
) -> None:  # type: ignore[no-untyped-def]
    """O_DIRECT where the file system takes it (whole parts; the CRT writes an unaligned tail buffered), and
    buffered writes where it refuses O_DIRECT (tmpfs): the same bytes either way."""
    data = os.urandom(size)
    boto_s3.put_object(Bucket=bucket, Key="obj", Body=data)
    if directory == "tmpfs":
        if not os.path.isdir("/dev/shm"):
            pytest.fail("this test needs /dev/shm (a tmpfs) for the file system that refuses O_DIRECT")
        tmp_path = Path(tempfile.mkdtemp(dir="/dev/shm"))
    try:
        target = tmp_path / "target.bin"
        client.download_file(f"s3://{bucket}/obj", target)
        assert target.read_bytes() == data
        assert [name for name in os.listdir(tmp_path) if name.endswith(".partial")] == []
    finally:
        if directory == "tmpfs":
            shutil.rmtree(tmp_path)


def test_a_large_download_bypasses_the_page_cache_unless_asked_not_to(
    s3_endpoint: str, bucket: str, boto_s3, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    data = os.urandom(17 * MiB + 3)
    boto_s3.put_object(Bucket=bucket, Key="big", Body=data)
    config = S3Config.resolve(part_size_bytes=5 * MiB)
    direct, buffered = tmp_path / "direct.bin", tmp_path / "buffered.bin"
    S3Client(config).download_file(f"s3://{bucket}/big", direct)
    S3Client(config.replace(direct_io_downloads=False)).download_file(f"s3://{bucket}/big", buffered)
    # Three whole parts went past the cache; only the 2 MiB tail (written buffered) can be resident. (Measured
    # before reading: reading brings pages in.)
    assert resident_fraction(direct) < 0.2
    assert resident_fraction(buffered) > 0.9
    assert direct.read_bytes() == data == buffered.read_bytes()
