"""S3FileSaver (save_by_s3) against a real S3 server (moto): every item lands byte-exact, URLs come back in
input order, and a failure leaves no half-written object behind."""

from __future__ import annotations

import io

import pytest
from torch.utils.data import DataLoader
from torch.utils.data.datapipes.iter import IterableWrapper

import torchdata_s3
from torchdata_s3 import S3FileSaver

MiB = 1024 * 1024


def stored(boto_s3, bucket: str, key: str) -> bytes:  # type: ignore[no-untyped-def]
    return boto_s3.get_object(Bucket=bucket, Key=key)["Body"].read()


def test_items_of_every_kind_land_in_order(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    items = [(f"s3://{bucket}/small/{i:03d}", bytes([i % 251]) * (1000 + i)) for i in range(40)]
    big = bytes(range(256)) * (5 * 4096)  # 5 MiB: streamed past a 1 MiB threshold
    items.insert(10, (f"s3://{bucket}/big.bin", big))
    items.insert(20, (f"s3://{bucket}/file.bin", io.BytesIO(b"from a file object" * 1000)))
    items.append((f"s3://{bucket}/view.bin", memoryview(b"a memoryview")))
    urls = list(
        IterableWrapper(items, deepcopy=False).save_by_s3(max_in_flight=8, multipart_threshold_bytes=1 * MiB)  # type: ignore[attr-defined]
    )
    assert urls == [url for url, _ in items]
    for url, data in items:
        key = url.split("/", 3)[3]
        expected = data.getvalue() if isinstance(data, io.BytesIO) else bytes(data)
        assert stored(boto_s3, bucket, key) == expected, url


def test_filepath_fn_and_text_mode(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    saver = S3FileSaver(
        [("a", "héllo"), ("b", "wörld")], mode="w", filepath_fn=lambda m: f"s3://{bucket}/t/{m}.txt"
    )
    assert list(saver) == [f"s3://{bucket}/t/a.txt", f"s3://{bucket}/t/b.txt"]
    assert stored(boto_s3, bucket, "t/a.txt").decode() == "héllo"
    with pytest.raises(TypeError, match="mode='w'"):
        list(S3FileSaver([(f"s3://{bucket}/x", "text")]))
    with pytest.raises(TypeError, match="bytes-like"):
        list(S3FileSaver([(f"s3://{bucket}/x", 12345)]))


def test_a_failed_item_raises_in_order_and_stops(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    boto_s3.put_object(Bucket=bucket, Key="exists", Body=b"keep me")
    items = [(f"s3://{bucket}/ok-{i}", b"x" * 100) for i in range(3)]
    items.append((f"s3://{bucket}/exists", b"new"))
    items += [(f"s3://{bucket}/after-{i}", b"y" * 100) for i in range(3)]
    saved = []
    with pytest.raises(torchdata_s3.S3ObjectExistsError, match="exists"):
        for url in S3FileSaver(items, overwrite=False):
            saved.append(url)
    assert saved == [url for url, _ in items[:3]]
    assert stored(boto_s3, bucket, "exists") == b"keep me"
    assert boto_s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_saver_in_dataloader_workers(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    items = [(f"s3://{bucket}/w/{i:02d}", f"object {i}".encode()) for i in range(12)]
    pipe = IterableWrapper(items).sharding_filter().save_by_s3()  # type: ignore[attr-defined]
    urls = sorted(DataLoader(pipe, batch_size=None, num_workers=2))
    assert urls == sorted(url for url, _ in items)
    for url, data in items:
        assert stored(boto_s3, bucket, url.split("/", 3)[3]) == data


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="mode"):
        S3FileSaver([], mode="ab")
    with pytest.raises(ValueError, match="max_in_flight"):
        S3FileSaver([], max_in_flight=0)
