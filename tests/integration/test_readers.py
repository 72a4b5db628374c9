"""The readers people hand the loader's streams to, unchanged, inside a DataLoader with workers: PIL,
torch.load, numpy.load, zipfile, tarfile (the modes torchdata's load_from_tar uses), pyarrow, csv, and
seek(0) + a second read. Each decodes the same as from io.BytesIO (what the original loader yielded)."""

from __future__ import annotations

import io
import multiprocessing

import pytest
from torch.utils.data import DataLoader
from torch.utils.data.datapipes.iter import IterableWrapper

from tests.integration.readers import PARQUET_COLUMN, decode, decoder_for, make_dataset, parquet_table
from torchdata_s3 import S3Client, S3Config

pytestmark = pytest.mark.integration

MiB = 1024 * 1024


@pytest.fixture
def formats(boto_s3, bucket: str) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """url -> the digest each reader gives for the object from io.BytesIO."""
    expected = {}
    for key, data in make_dataset().items():
        boto_s3.put_object(Bucket=bucket, Key=f"formats/{key}", Body=data)
        url = f"s3://{bucket}/formats/{key}"
        expected[url] = decoder_for(url)(io.BytesIO(data))
    return expected


# The formats are small: by default each arrives whole (an io.BytesIO, torchdata_s3/landed.py);
# small_object_bytes=0 streams them through S3ObjectStream.
@pytest.mark.parametrize("small_object_bytes", [S3Config.small_object_bytes, 0], ids=["landed", "streamed"])
@pytest.mark.parametrize(("num_workers", "context"), [(0, None), (2, "fork"), (2, "spawn")])
def test_every_reader_takes_the_loaders_streams_unchanged(
    formats: dict[str, str], bucket: str, num_workers: int, context: str, small_object_bytes: int
) -> None:
    pipe = (
        IterableWrapper([f"s3://{bucket}/formats/"])
        .load_files_by_s3(small_object_bytes=small_object_bytes)
        .map(decode)
    )
    loader = DataLoader(
        pipe,
        batch_size=None,
        num_workers=num_workers,
        multiprocessing_context=multiprocessing.get_context(context) if context else None,
    )
    assert dict(loader) == formats


def test_a_parquet_column_costs_about_its_own_bytes(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    import pyarrow.parquet as pq

    data = parquet_table(columns=24, rows=100_000, seed=2)  # ~19 MB, ~0.8 MB a column
    boto_s3.put_object(Bucket=bucket, Key="wide.parquet", Body=data)
    expected = pq.ParquetFile(io.BytesIO(data)).read(columns=[PARQUET_COLUMN])
    config = S3Config.resolve(retain_bytes=4 * MiB)  # below the file's size: not kept whole
    with S3Client(config).open(f"s3://{bucket}/wide.parquet") as stream:
        assert pq.ParquetFile(stream).read(columns=[PARQUET_COLUMN]).equals(expected)
        # The footer (in the tail's ranged GET) and the column chunk: a few MiB, not the file.
        assert stream.bytes_fetched < len(data) / 4, (stream.bytes_fetched, len(data))


def test_zip_members_picked_from_a_large_archive_cost_about_their_own_bytes(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    import random
    import zipfile

    rng = random.Random(3)
    members = {f"m{i:02d}.bin": rng.randbytes(2 * MiB) for i in range(20)}  # 40 MiB, stored
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_STORED) as out:
        for name, body in members.items():
            out.writestr(name, body)
    boto_s3.put_object(Bucket=bucket, Key="large.zip", Body=archive.getvalue())
    config = S3Config.resolve(retain_bytes=4 * MiB)
    with S3Client(config).open(f"s3://{bucket}/large.zip") as stream, zipfile.ZipFile(stream) as opened:
        for name in ("m03.bin", "m17.bin", "m09.bin"):
            assert opened.read(name) == members[name]
        assert stream.bytes_fetched < 3 * 2 * MiB + 6 * MiB, stream.bytes_fetched
