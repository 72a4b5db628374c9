"""S3Client.download_file / upload_file: the CRT moves the bytes between a local file and an object itself."""

from __future__ import annotations

import os
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
