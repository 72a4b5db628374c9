"""Writers against a real S3 server (moto): what lands is byte-exact, and nothing lands unless closed.

Every object written is read back with boto3, an independent client, and every test that expects nothing to
land also checks that no multipart upload is left pending on the server.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import subprocess
import sys
import textwrap

import pytest

import torchdata_s3
from torchdata_s3 import S3Client, S3Config

MiB = 1024 * 1024
# A low threshold makes a few MiB a multipart upload already. Parts stay at least 5 MiB (S3's minimum part
# size, which the CRT enforces), so 11 MiB makes several parts.
SMALL_PARTS = {"multipart_threshold_bytes": 1 * MiB}


def payload(size: int, seed: int = 0) -> bytes:
    out = bytearray()
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(f"{seed}-{counter}".encode()).digest()
        counter += 1
    return bytes(out[:size])


def stored(boto_s3, bucket: str, key: str) -> bytes:  # type: ignore[no-untyped-def]
    return boto_s3.get_object(Bucket=bucket, Key=key)["Body"].read()


def keys(boto_s3, bucket: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [o["Key"] for o in boto_s3.list_objects_v2(Bucket=bucket).get("Contents", [])]


def pending_uploads(boto_s3, bucket: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [u["Key"] for u in boto_s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])]


@pytest.mark.parametrize(
    "size",
    [0, 1, 1000, 1 * MiB, 1 * MiB + 1, 11 * MiB + 12345],
    ids=["empty", "1B", "1kB", "at-threshold", "threshold+1", "several-parts"],
)
def test_written_objects_read_back_byte_exact(boto_s3, bucket: str, size: int) -> None:  # type: ignore[no-untyped-def]
    data = payload(size, seed=size)
    url = f"s3://{bucket}/dir/obj-{size}.bin"
    with torchdata_s3.open(url, "wb", **SMALL_PARTS) as writer:
        # Uneven writes, some smaller than the coalescing buffer and some larger than a part.
        position = 0
        for step in (1, 100, 70_000, 2 * MiB, 333):
            writer.write(data[position : position + step])
            position = min(size, position + step)
        writer.write(data[position:])
        assert writer.tell() == size
    assert stored(boto_s3, bucket, f"dir/obj-{size}.bin") == data
    etag = boto_s3.head_object(Bucket=bucket, Key=f"dir/obj-{size}.bin")["ETag"]
    if size <= MiB:
        assert writer.etag == etag
    else:
        # The CRT reads a multipart upload's ETag from <CompleteMultipartUploadResult>; moto names that
        # element CompleteMultipartUploadResponse, so against moto the ETag stays unknown.
        assert writer.etag in ("", etag)
    assert pending_uploads(boto_s3, bucket) == []


def test_nothing_is_visible_before_close(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    writer = torchdata_s3.open(f"s3://{bucket}/late.bin", "wb", **SMALL_PARTS)
    writer.write(payload(3 * MiB))
    writer.flush()
    assert keys(boto_s3, bucket) == []
    writer.close()
    assert keys(boto_s3, bucket) == ["late.bin"]


@pytest.mark.parametrize("size", [1000, 3 * MiB], ids=["single-put", "multipart"])
def test_an_exception_inside_with_aborts(boto_s3, bucket: str, size: int) -> None:  # type: ignore[no-untyped-def]
    url = f"s3://{bucket}/aborted.bin"
    with (
        pytest.raises(RuntimeError, match="the job failed"),
        torchdata_s3.open(url, "wb", **SMALL_PARTS) as writer,
    ):
        writer.write(payload(size))
        raise RuntimeError("the job failed")
    assert writer.closed
    assert keys(boto_s3, bucket) == []
    assert pending_uploads(boto_s3, bucket) == []


def test_abort_and_a_dropped_writer_leave_nothing(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    writer = torchdata_s3.open(f"s3://{bucket}/a.bin", "wb", **SMALL_PARTS)
    writer.write(payload(3 * MiB))
    writer.abort()
    writer.abort()  # idempotent
    with pytest.raises(ValueError):
        writer.write(b"more")
    dropped = torchdata_s3.open(f"s3://{bucket}/b.bin", "wb", **SMALL_PARTS)
    dropped.write(payload(3 * MiB))
    del dropped
    assert keys(boto_s3, bucket) == []
    assert pending_uploads(boto_s3, bucket) == []


def test_overwrite_false_refuses_an_existing_object(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    boto_s3.put_object(Bucket=bucket, Key="taken.bin", Body=b"original")
    for size in (10, 3 * MiB):
        writer = torchdata_s3.open(f"s3://{bucket}/taken.bin", "wb", overwrite=False, **SMALL_PARTS)
        writer.write(payload(size))
        with pytest.raises(torchdata_s3.S3ObjectExistsError, match="overwrite=False") as raised:
            writer.close()
        assert isinstance(raised.value, FileExistsError)
        assert "s3://" + bucket + "/taken.bin" in str(raised.value)
    assert stored(boto_s3, bucket, "taken.bin") == b"original"
    assert pending_uploads(boto_s3, bucket) == []
    # And on a free key it creates the object.
    with torchdata_s3.open(f"s3://{bucket}/free.bin", "wb", overwrite=False) as writer:
        writer.write(b"new")
    assert stored(boto_s3, bucket, "free.bin") == b"new"


@pytest.mark.parametrize("algorithm", ["crc32c", "crc64nvme"])
@pytest.mark.parametrize("size", [1000, 3 * MiB], ids=["single-put", "multipart"])
def test_checksummed_uploads_land_intact(boto_s3, bucket: str, algorithm: str, size: int) -> None:  # type: ignore[no-untyped-def]
    data = payload(size, seed=7)
    with torchdata_s3.open(f"s3://{bucket}/sum.bin", "wb", checksum=algorithm, **SMALL_PARTS) as writer:
        writer.write(data)
    assert stored(boto_s3, bucket, "sum.bin") == data


def test_writers_round_trip_through_our_reader_and_torch(bucket: str) -> None:
    import torch

    state = {"weight": torch.arange(300_000, dtype=torch.float32), "step": 7}
    url = f"s3://{bucket}/ckpt.pt"
    with torchdata_s3.open(url, "wb") as writer:
        torch.save(state, writer)
    with torchdata_s3.open(url, "rb") as reader:
        loaded = torch.load(reader, weights_only=True)
    assert loaded["step"] == 7 and torch.equal(loaded["weight"], state["weight"])


def test_head_and_delete(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    client = S3Client()
    with client.open(f"s3://{bucket}/h.bin", "wb") as writer:
        writer.write(b"x" * 1234)
    info = client.head(f"s3://{bucket}/h.bin")
    assert info.size == 1234 and info.etag == writer.etag and info.url == f"s3://{bucket}/h.bin"
    client.delete(f"s3://{bucket}/h.bin")
    client.delete(f"s3://{bucket}/h.bin")  # S3 answers success for a missing key
    assert keys(boto_s3, bucket) == []
    with pytest.raises(torchdata_s3.S3FileNotFoundError, match=f"s3://{bucket}/h.bin"):
        client.head(f"s3://{bucket}/h.bin")


def test_bad_input_to_writers_is_refused_clearly(bucket: str) -> None:
    with pytest.raises(torchdata_s3.InvalidS3UrlError):
        torchdata_s3.open("http://not-s3/key", "wb")
    with pytest.raises(IsADirectoryError, match="prefix"):
        torchdata_s3.open(f"s3://{bucket}/dir/", "wb")
    with pytest.raises(ValueError, match="mode"):
        torchdata_s3.open(f"s3://{bucket}/k", "w")
    with pytest.raises(ValueError, match="checksum"):
        torchdata_s3.open(f"s3://{bucket}/k", "wb", checksum="md5")
    with pytest.raises(ValueError, match="writers"):
        torchdata_s3.open(f"s3://{bucket}/k", "rb", overwrite=False)
    with pytest.raises(TypeError):
        torchdata_s3.open(f"s3://{bucket}/k", "wb", no_such_option=1)
    writer = torchdata_s3.open(f"s3://{bucket}/k", "wb")
    with pytest.raises(TypeError):
        writer.write("text, not bytes")
    writer.close()
    with pytest.raises(ValueError, match="closed"):
        writer.write(b"after close")


def test_writing_to_a_missing_bucket_names_it(s3_endpoint: str) -> None:
    for size in (10, 3 * MiB):
        writer = torchdata_s3.open("s3://no-such-bucket-here/k.bin", "wb", **SMALL_PARTS)
        with pytest.raises(torchdata_s3.S3FileNotFoundError, match="no-such-bucket-here") as raised:
            writer.write(payload(size))
            writer.close()
        assert writer.closed or raised.value is not None


def test_write_errors_never_contain_credentials(s3_endpoint: str) -> None:
    secret, token = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYSECRETKEY", "FwoGZXIvYXdzEXAMPLETOKEN"
    options = {"access_key_id": "AKIDWRITER", "secret_access_key": secret, "session_token": token}
    for size in (10, 3 * MiB):
        writer = torchdata_s3.open("s3://no-such-bucket-here/k.bin", "wb", **SMALL_PARTS, **options)
        with pytest.raises(torchdata_s3.S3Error) as raised:
            writer.write(payload(size))
            writer.close()
        shown = str(raised.value) + repr(raised.value) + repr(pickle.dumps(raised.value)) + repr(writer)
        assert secret not in shown and token not in shown


def test_a_fork_child_cannot_use_its_parents_writer(bucket: str, boto_s3) -> None:  # type: ignore[no-untyped-def]
    writer = torchdata_s3.open(f"s3://{bucket}/forked.bin", "wb", **SMALL_PARTS)
    writer.write(payload(3 * MiB))
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        outcome = "no error"
        try:
            writer.write(b"x" * (2 * MiB))
            writer.close()
        except io.UnsupportedOperation as error:
            outcome = "UnsupportedOperation: " + str(error)
        except BaseException as error:  # reported to the parent
            outcome = f"{type(error).__name__}: {error}"
        os.write(write_end, pickle.dumps(outcome))
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        outcome = pickle.loads(pipe.read())
    os.waitpid(pid, 0)
    assert outcome.startswith("UnsupportedOperation") and "open a new one in this process" in outcome
    writer.write(b"tail")
    writer.close()
    assert stored(boto_s3, bucket, "forked.bin") == payload(3 * MiB) + b"tail"


def test_config_rejects_bad_write_settings() -> None:
    with pytest.raises(ValueError, match="write_window_bytes"):
        S3Config(write_window_bytes=0)
    with pytest.raises(ValueError, match="multipart_threshold_bytes"):
        S3Config(multipart_threshold_bytes=-1)


def test_one_huge_write_stays_within_the_write_window(s3_endpoint: str, bucket: str) -> None:
    # torch.save hands a whole tensor to write() at once; the writer must still hold only about the window.
    # A fresh process, so that its peak RSS (VmHWM) measures this upload alone.
    script = textwrap.dedent(
        f"""
        import os, torchdata_s3
        def peak_mib():
            return int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) // 1024
        data = os.urandom(256 * 1024 * 1024)
        before = peak_mib()
        with torchdata_s3.open("s3://{bucket}/huge", "wb", write_window_bytes=32 * 1024 * 1024) as writer:
            writer.write(data)
        print(peak_mib() - before)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True
    )
    growth_mib = int(result.stdout.split()[-1])
    # 32 MiB window + a part being filled + the CRT's part buffers in flight; unbounded, it was the whole 256.
    assert growth_mib < 128, f"a 256 MiB write grew the writer's peak RSS by {growth_mib} MiB"
