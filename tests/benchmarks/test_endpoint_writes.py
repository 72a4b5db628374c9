"""The local S3 endpoint with writes=True: uploads by real clients land byte-exact, on both profiles."""

from __future__ import annotations

import base64
import http.client
import io
import os
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Optional
from urllib.parse import urlsplit

import pytest
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError

from benchmarks.cli import PROFILE_CHECK_ATTEMPTS, PROFILE_CHECK_PAUSE_S
from benchmarks.endpoint.nginx import LocalEndpoint, ensure_nginx_installed
from benchmarks.endpoint.verify import check_profile
from benchmarks.endpoint.verify_writes import PROBE_ATTEMPTS
from tests.benchmarks.endpoint_client import boto3_client

pytestmark = pytest.mark.integration

BUCKET = "data"
OTHER_BUCKET = "other"
STATIC_KEYS = [f"static/{number:03d}.txt" for number in range(300)]
PROBE_KEY = "probe.bin"
PROBE_BYTES = 16 * 1024 * 1024
S3LIKE_LATENCY_MS = 30.0
S3LIKE_BANDWIDTH_MBPS = 90.0
PART_BYTES = 5 * 1024 * 1024
MULTIPART_BODY = os.urandom(2 * PART_BYTES + 12345)  # three parts, the last one short


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("endpoint-writes")
    for key in STATIC_KEYS:
        (root / BUCKET / key).parent.mkdir(parents=True, exist_ok=True)
        (root / BUCKET / key).write_bytes(key.encode())
    (root / BUCKET / PROBE_KEY).write_bytes(os.urandom(PROBE_BYTES))
    (root / OTHER_BUCKET).mkdir()
    return root


@pytest.fixture(scope="module")
def fast(data_root: Path) -> Iterator[LocalEndpoint]:
    ensure_nginx_installed()
    with LocalEndpoint(data_root, profile="fast", writes=True) as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def s3like(data_root: Path) -> Iterator[LocalEndpoint]:
    ensure_nginx_installed()
    endpoint = LocalEndpoint(data_root, "s3like", S3LIKE_LATENCY_MS, S3LIKE_BANDWIDTH_MBPS, writes=True)
    with endpoint:
        yield endpoint


@pytest.fixture(params=["fast", "s3like"])
def endpoint(request: pytest.FixtureRequest) -> LocalEndpoint:
    """Each behaviour check runs against both profiles: shaping must not change what is stored."""
    return request.getfixturevalue(request.param)


@pytest.fixture
def key(request: pytest.FixtureRequest) -> str:
    """A key of its own for each test (the profiles share one data root)."""
    return f"written/{request.node.originalname}-{os.urandom(4).hex()}"


def call(
    endpoint: LocalEndpoint, method: str, path: str, body: bytes = b"", headers: Optional[dict] = None
) -> tuple[int, http.client.HTTPMessage, bytes]:
    url = urlsplit(endpoint.endpoint_url)
    connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=30)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.headers, response.read()
    finally:
        connection.close()


def stored(data_root: Path, key: str, bucket: str = BUCKET) -> Optional[bytes]:
    path = data_root / bucket / key
    return path.read_bytes() if path.is_file() else None


def pending_upload_dirs(data_root: Path) -> list[str]:
    uploads = data_root / ".uploads"
    return [entry.name for entry in uploads.iterdir() if not entry.name.startswith(".")]


def listed_keys(s3, prefix: str, bucket: str = BUCKET) -> list[str]:  # type: ignore[no-untyped-def]
    return [entry["Key"] for entry in s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])]


# Real clients, byte-exact ----------------------------------------------------------------------------------


def test_boto3_put_object_round_trips(endpoint: LocalEndpoint, data_root: Path, key: str) -> None:
    s3 = boto3_client(endpoint)
    body = os.urandom(300_000)
    answer = s3.put_object(Bucket=BUCKET, Key=key, Body=body)
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == body
    assert stored(data_root, key) == body
    assert answer["ETag"] == s3.head_object(Bucket=BUCKET, Key=key)["ETag"]


def test_boto3_multipart_upload_round_trips(endpoint: LocalEndpoint, data_root: Path, key: str) -> None:
    s3 = boto3_client(endpoint)
    transfer = TransferConfig(multipart_threshold=PART_BYTES, multipart_chunksize=PART_BYTES)
    s3.upload_fileobj(io.BytesIO(MULTIPART_BODY), BUCKET, key, Config=transfer)
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == MULTIPART_BODY
    assert stored(data_root, key) == MULTIPART_BODY
    uploads = s3.list_multipart_uploads(Bucket=BUCKET, Prefix=key).get("Uploads", [])
    assert uploads == []


def test_our_writer_round_trips_small_and_multipart(
    endpoint: LocalEndpoint, data_root: Path, key: str
) -> None:
    torchdata_s3 = pytest.importorskip("torchdata_s3")
    options = dict(endpoint_url=endpoint.endpoint_url, access_key_id="x", secret_access_key="y")
    small, large = os.urandom(1000), os.urandom(9 * 1024 * 1024 + 7)  # over the 8 MiB threshold
    for suffix, body in (("small", small), ("large", large)):
        with torchdata_s3.open(f"s3://{BUCKET}/{key}-{suffix}", "wb", **options) as writer:
            writer.write(body)
        assert stored(data_root, f"{key}-{suffix}") == body
        assert call(endpoint, "GET", f"/{BUCKET}/{key}-{suffix}")[2] == body


def test_our_writer_with_a_crc32c_trailer_is_decoded(fast: LocalEndpoint, data_root: Path, key: str) -> None:
    """The CRT's aws-chunked bodies (checksum in a trailer), PutObject and UploadPart alike."""
    torchdata_s3 = pytest.importorskip("torchdata_s3")
    options = dict(endpoint_url=fast.endpoint_url, access_key_id="x", secret_access_key="y")
    for suffix, body in (("small", os.urandom(5000)), ("large", os.urandom(9 * 1024 * 1024))):
        with torchdata_s3.open(f"s3://{BUCKET}/{key}-{suffix}", "wb", checksum="crc32c", **options) as writer:
            writer.write(body)
        assert stored(data_root, f"{key}-{suffix}") == body


def test_our_writer_refuses_to_overwrite_when_asked(fast: LocalEndpoint, data_root: Path, key: str) -> None:
    torchdata_s3 = pytest.importorskip("torchdata_s3")
    options = dict(endpoint_url=fast.endpoint_url, access_key_id="x", secret_access_key="y")
    (data_root / BUCKET / key).parent.mkdir(parents=True, exist_ok=True)
    (data_root / BUCKET / key).write_bytes(b"first")
    writer = torchdata_s3.open(f"s3://{BUCKET}/{key}", "wb", overwrite=False, **options)
    writer.write(b"second")
    with pytest.raises(FileExistsError):
        writer.close()
    assert stored(data_root, key) == b"first"


# Multipart bookkeeping, listings, deletes ------------------------------------------------------------------


def test_abort_leaves_no_object_and_no_parts(endpoint: LocalEndpoint, data_root: Path, key: str) -> None:
    s3 = boto3_client(endpoint)
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=1, Body=os.urandom(PART_BYTES))
    listed = s3.list_multipart_uploads(Bucket=BUCKET, Prefix=key)["Uploads"]
    assert [(entry["Key"], entry["UploadId"]) for entry in listed] == [(key, upload)]
    assert upload in pending_upload_dirs(data_root)
    s3.abort_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload)
    assert s3.list_multipart_uploads(Bucket=BUCKET, Prefix=key).get("Uploads", []) == []
    assert upload not in pending_upload_dirs(data_root)
    assert stored(data_root, key) is None
    with pytest.raises(ClientError) as raised:
        s3.complete_multipart_upload(
            Bucket=BUCKET,
            Key=key,
            UploadId=upload,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": "x"}]},
        )
    assert raised.value.response["Error"]["Code"] == "NoSuchUpload"


def test_complete_takes_the_listed_parts_in_order_and_checks_them(
    fast: LocalEndpoint, data_root: Path, key: str
) -> None:
    s3 = boto3_client(fast)
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    parts = {number: bytes([number]) * PART_BYTES for number in (1, 2, 3)}
    etags = {
        number: s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=number, Body=body)["ETag"]
        for number, body in parts.items()
    }
    for wrong in ([3, 1], [1, 1]):  # S3 wants ascending part numbers, each once
        listing = [{"PartNumber": number, "ETag": etags[number]} for number in wrong]
        with pytest.raises(ClientError) as raised:
            s3.complete_multipart_upload(
                Bucket=BUCKET, Key=key, UploadId=upload, MultipartUpload={"Parts": listing}
            )
        assert raised.value.response["Error"]["Code"] == "InvalidPartOrder"
    with pytest.raises(ClientError) as raised:
        stale = [{"PartNumber": 1, "ETag": '"not-the-etag"'}]
        s3.complete_multipart_upload(
            Bucket=BUCKET, Key=key, UploadId=upload, MultipartUpload={"Parts": stale}
        )
    assert raised.value.response["Error"]["Code"] == "InvalidPart"
    listing = [{"PartNumber": number, "ETag": etags[number]} for number in (1, 3)]  # part 2 left out
    s3.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload, MultipartUpload={"Parts": listing})
    assert stored(data_root, key) == parts[1] + parts[3]
    assert upload not in pending_upload_dirs(data_root)


def complete(s3, key: str, upload: str, etags: dict[int, str], **extra: str) -> None:  # type: ignore[no-untyped-def]
    listing = [{"PartNumber": number, "ETag": etag} for number, etag in sorted(etags.items())]
    s3.complete_multipart_upload(
        Bucket=BUCKET, Key=key, UploadId=upload, MultipartUpload={"Parts": listing}, **extra
    )


def upload_parts(s3, key: str, upload: str, bodies: list[tuple[int, bytes]]) -> dict[int, str]:  # type: ignore[no-untyped-def]
    """Upload (part number, body) pairs one after the other, in the order given; the last ETag per number."""
    return {
        number: s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=number, Body=body)["ETag"]
        for number, body in bodies
    }


@pytest.mark.parametrize(
    "order",
    [[1, 2, 3], [3, 2, 1], [2, 1, 3]],
    ids=["in-order", "short-last-part-first", "shuffled"],
)
def test_parts_assemble_exactly_whatever_their_order(
    fast: LocalEndpoint, data_root: Path, key: str, order: list[int]
) -> None:
    """Parts are copied into place as they arrive (sized by the first to arrive); Complete fills the rest."""
    s3 = boto3_client(fast)
    bodies = {1: os.urandom(PART_BYTES), 2: os.urandom(PART_BYTES), 3: os.urandom(777)}
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    complete(s3, key, upload, upload_parts(s3, key, upload, [(number, bodies[number]) for number in order]))
    assert stored(data_root, key) == bodies[1] + bodies[2] + bodies[3]


def test_a_subset_of_the_parts_assembles_exactly(fast: LocalEndpoint, data_root: Path, key: str) -> None:
    s3 = boto3_client(fast)
    bodies = {number: os.urandom(PART_BYTES) for number in (1, 2, 3, 4)}
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    etags = upload_parts(s3, key, upload, sorted(bodies.items()))
    complete(s3, key, upload, {number: etags[number] for number in (1, 3)})
    assert stored(data_root, key) == bodies[1] + bodies[3]


def test_a_part_uploaded_again_replaces_the_first_version(
    fast: LocalEndpoint, data_root: Path, key: str
) -> None:
    """Again with the same size, and again with another size (which is not placed as it arrives)."""
    s3 = boto3_client(fast)
    first, same_size, other_size = os.urandom(PART_BYTES), os.urandom(PART_BYTES), os.urandom(PART_BYTES + 9)
    for replacement in (same_size, other_size):
        upload = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
        etags = upload_parts(s3, key, upload, [(1, first), (2, first), (2, replacement), (3, b"end")])
        complete(s3, key, upload, etags)
        assert stored(data_root, key) == first + replacement + b"end"
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    stale = upload_parts(s3, key, upload, [(1, first)])
    upload_parts(s3, key, upload, [(1, same_size)])
    with pytest.raises(ClientError) as raised:
        complete(s3, key, upload, stale)
    assert raised.value.response["Error"]["Code"] == "InvalidPart"
    s3.abort_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload)


def test_a_failed_complete_can_be_completed_again(fast: LocalEndpoint, data_root: Path, key: str) -> None:
    """A Complete refused after assembling (If-None-Match: * and the object exists) leaves the upload
    whole: completing it again gives exactly its bytes."""
    s3 = boto3_client(fast)
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"already here")
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    bodies = {number: os.urandom(PART_BYTES) for number in (1, 2)}
    etags = {
        number: s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=number, Body=body)["ETag"]
        for number, body in bodies.items()
    }
    with pytest.raises(ClientError) as raised:
        complete(s3, key, upload, etags, IfNoneMatch="*")
    assert raised.value.response["Error"]["Code"] == "PreconditionFailed"
    assert stored(data_root, key) == b"already here"
    complete(s3, key, upload, etags)
    assert stored(data_root, key) == bodies[1] + bodies[2]


def test_listing_sees_writes_and_deletes_at_once(endpoint: LocalEndpoint, data_root: Path, key: str) -> None:
    s3 = boto3_client(endpoint)
    assert len(listed_keys(s3, "static/")) == len(STATIC_KEYS)  # the bucket's index exists before the writes
    new_keys = [f"static/{key.replace('/', '-')}-{number}" for number in range(3)]
    for new_key in new_keys:
        s3.put_object(Bucket=BUCKET, Key=new_key, Body=new_key.encode())
    assert listed_keys(s3, "static/") == sorted([*STATIC_KEYS, *new_keys])
    listed = {
        entry["Key"]: entry for entry in s3.list_objects_v2(Bucket=BUCKET, Prefix=new_keys[0])["Contents"]
    }
    assert listed[new_keys[0]]["ETag"] == s3.head_object(Bucket=BUCKET, Key=new_keys[0])["ETag"]
    s3.delete_object(Bucket=BUCKET, Key=new_keys[0])
    s3.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": new_keys[1]}]})
    assert listed_keys(s3, "static/") == sorted([*STATIC_KEYS, new_keys[2]])
    s3.delete_object(Bucket=BUCKET, Key=new_keys[2])
    assert stored(data_root, new_keys[0]) is None


def test_delete_removes_and_a_missing_key_is_no_error(
    endpoint: LocalEndpoint, data_root: Path, key: str
) -> None:
    s3 = boto3_client(endpoint)
    s3.put_object(Bucket=OTHER_BUCKET, Key=f"{key}/deep/object", Body=b"x")
    assert (
        s3.delete_object(Bucket=OTHER_BUCKET, Key=f"{key}/deep/object")["ResponseMetadata"]["HTTPStatusCode"]
        == 204
    )
    assert stored(data_root, f"{key}/deep/object", OTHER_BUCKET) is None
    assert not (data_root / OTHER_BUCKET / key).exists()  # no empty directories left behind
    with pytest.raises(ClientError) as raised:
        s3.get_object(Bucket=OTHER_BUCKET, Key=f"{key}/deep/object")
    assert raised.value.response["Error"]["Code"] == "NoSuchKey"
    assert call(endpoint, "DELETE", f"/{OTHER_BUCKET}/never/written")[0] == 204


@pytest.mark.parametrize(
    "name",
    ["with space.txt", "plus+sign.txt", "amp&and<angle>'quote\".txt", "ünïcødé ファイル.txt", "100%.txt"],
)
def test_keys_with_special_characters_are_written_where_reads_find_them(
    fast: LocalEndpoint, data_root: Path, key: str, name: str
) -> None:
    s3 = boto3_client(fast)
    s3.put_object(Bucket=BUCKET, Key=f"{key}/{name}", Body=name.encode())
    assert stored(data_root, f"{key}/{name}") == name.encode()
    assert s3.get_object(Bucket=BUCKET, Key=f"{key}/{name}")["Body"].read() == name.encode()
    assert listed_keys(s3, f"{key}/") == [f"{key}/{name}"]


def test_the_access_log_counts_what_uploads_brought_in(fast: LocalEndpoint, key: str) -> None:
    from benchmarks.endpoint.access_log import AccessLog

    log = AccessLog(fast.access_log)
    start = log.offset()
    assert call(fast, "PUT", f"/{BUCKET}/{key}", b"x" * 100_000)[0] == 200
    served = log.since(start)
    assert served.requests == 1
    assert 100_000 < served.request_bytes < 100_000 + 1000  # the body, the request line and headers


def test_an_overwrite_is_served_at_once(fast: LocalEndpoint, key: str) -> None:
    """nginx caches no open file with writes on: a replaced object is not served from a stale descriptor."""
    for body in (b"first version", b"second, longer version"):
        assert call(fast, "PUT", f"/{BUCKET}/{key}", body)[0] == 200
        assert call(fast, "GET", f"/{BUCKET}/{key}")[2] == body


def test_copy_object_copies_the_bytes(endpoint: LocalEndpoint, data_root: Path, key: str) -> None:
    """s3torchconnector's DCP writer commits its metadata file with CopyObject and a delete."""
    s3 = boto3_client(endpoint)
    body = os.urandom(70_000)
    s3.put_object(Bucket=BUCKET, Key=f"{key}/source", Body=body)
    answer = s3.copy_object(
        Bucket=OTHER_BUCKET, Key=f"{key}/copy", CopySource={"Bucket": BUCKET, "Key": f"{key}/source"}
    )
    assert (
        answer["CopyObjectResult"]["ETag"] == s3.head_object(Bucket=OTHER_BUCKET, Key=f"{key}/copy")["ETag"]
    )
    s3.delete_object(Bucket=BUCKET, Key=f"{key}/source")
    assert stored(data_root, f"{key}/copy", OTHER_BUCKET) == body
    assert listed_keys(s3, f"{key}/", OTHER_BUCKET) == [f"{key}/copy"]
    with pytest.raises(ClientError) as raised:
        s3.copy_object(Bucket=BUCKET, Key=f"{key}/x", CopySource={"Bucket": BUCKET, "Key": f"{key}/gone"})
    assert raised.value.response["Error"]["Code"] == "NoSuchKey"


# aws-chunked bodies ----------------------------------------------------------------------------------------


def aws_chunked(payload: bytes, chunk: int, crc32: Optional[str] = None) -> bytes:
    framed = b"".join(
        b"%x\r\n%s\r\n" % (len(payload[start : start + chunk]), payload[start : start + chunk])
        for start in range(0, len(payload), chunk)
    )
    if crc32 is None:
        crc32 = base64.b64encode(zlib.crc32(payload).to_bytes(4, "big")).decode()
    return framed + b"0\r\nx-amz-checksum-crc32:" + crc32.encode() + b"\r\n\r\n"


CHUNKED_HEADERS = {
    "Content-Encoding": "aws-chunked",
    "x-amz-content-sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
    "x-amz-trailer": "x-amz-checksum-crc32",
}


def test_aws_chunked_bodies_are_decoded(endpoint: LocalEndpoint, data_root: Path, key: str) -> None:
    payload = os.urandom(200_000)
    headers = {**CHUNKED_HEADERS, "x-amz-decoded-content-length": str(len(payload))}
    status, answer, _ = call(endpoint, "PUT", f"/{BUCKET}/{key}", aws_chunked(payload, 65536), headers)
    assert status == 200 and answer["ETag"]
    assert stored(data_root, key) == payload


@pytest.mark.parametrize(
    ("body", "decoded_length"),
    [
        (aws_chunked(b"abcdef" * 1000, 1000, crc32="AAAAAA=="), 6000),
        (aws_chunked(b"abcdef" * 1000, 1000), 5999),
        (b"not a chunk header\r\n", 10),
    ],
    ids=["wrong-crc32", "wrong-decoded-length", "no-framing"],
)
def test_bad_aws_chunked_bodies_are_refused_and_nothing_stored(
    fast: LocalEndpoint, data_root: Path, key: str, body: bytes, decoded_length: int
) -> None:
    headers = {**CHUNKED_HEADERS, "x-amz-decoded-content-length": str(decoded_length)}
    status, _, document = call(fast, "PUT", f"/{BUCKET}/{key}", body, headers)
    assert status == 400 and b"aws-chunked" in document
    assert stored(data_root, key) is None


def test_boto3_over_https_sends_aws_chunked_and_it_is_decoded(
    data_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """botocore >= 1.36 sends PutObject over https as aws-chunked with a CRC32 trailer."""
    from benchmarks.endpoint.certificates import make_session_certificates

    certificates = make_session_certificates(tmp_path)
    monkeypatch.setenv("AWS_CA_BUNDLE", str(certificates.ca_file))
    with LocalEndpoint(data_root, writes=True, tls=certificates.valid.nginx_files) as endpoint:
        s3 = boto3_client(endpoint)
        body = os.urandom(100_000)
        s3.put_object(Bucket=OTHER_BUCKET, Key="over-https", Body=body)
    assert stored(data_root, "over-https", OTHER_BUCKET) == body


# What the endpoint refuses ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        (f"/{BUCKET}/copied?partNumber=1&uploadId=0", {"x-amz-copy-source": f"/{BUCKET}/{PROBE_KEY}"}),
        (
            f"/{BUCKET}/copied",
            {"x-amz-copy-source": f"/{BUCKET}/{PROBE_KEY}", "x-amz-copy-source-if-match": "x"},
        ),
        (f"/{BUCKET}/a/../escape", {}),
        (f"/{BUCKET}/trailing/", {}),
    ],
)
def test_unsupported_writes_are_refused_and_nothing_stored(
    fast: LocalEndpoint, data_root: Path, path: str, headers: dict
) -> None:
    status, _, document = call(fast, "PUT", path, b"bytes", headers)
    assert status == 501 and b"NotImplemented" in document
    assert not (data_root / BUCKET / "copied").exists() and not (data_root / "escape").exists()


def test_uploads_in_progress_are_hidden(fast: LocalEndpoint) -> None:
    s3 = boto3_client(fast)
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key="hidden")["UploadId"]
    try:
        assert call(fast, "GET", f"/.uploads/{upload}/upload.json")[0] == 404
        assert call(fast, "GET", "/.uploads?list-type=2")[0] == 404
    finally:
        s3.abort_multipart_upload(Bucket=BUCKET, Key="hidden", UploadId=upload)


def test_a_read_only_endpoint_refuses_writes(data_root: Path) -> None:
    with LocalEndpoint(data_root) as read_only:
        assert call(read_only, "PUT", f"/{BUCKET}/refused", b"bytes")[0] == 404  # nginx: no such file
        assert call(read_only, "PUT", f"/{BUCKET}/{STATIC_KEYS[0]}", b"bytes")[0] == 405
        assert call(read_only, "PUT", f"/{OTHER_BUCKET}", b"")[0] == 501  # the sidecar, as before writes
        assert call(read_only, "GET", f"/{BUCKET}/{STATIC_KEYS[0]}")[2] == STATIC_KEYS[0].encode()
    assert stored(data_root, "refused") is None
    assert stored(data_root, STATIC_KEYS[0]) == STATIC_KEYS[0].encode()


# Profiles --------------------------------------------------------------------------------------------------


def test_s3like_delivers_latency_and_bandwidth_for_writes_and_reads(s3like: LocalEndpoint) -> None:
    # As the harness does (benchmarks.cli.checked_profile): a burst of other work on a shared machine can
    # starve one probe connection for a moment (seen in a CI run beside a benchmark: 47 MB/s against a 90
    # MB/s cap), while a profile that is not in effect fails every attempt.
    for attempt in range(1, PROFILE_CHECK_ATTEMPTS + 1):
        try:
            measured = check_profile(
                s3like.endpoint_url,
                BUCKET,
                PROBE_KEY,
                "s3like",
                S3LIKE_LATENCY_MS,
                S3LIKE_BANDWIDTH_MBPS,
                writes=True,
            )
            break
        except RuntimeError:
            if attempt == PROFILE_CHECK_ATTEMPTS:
                raise
            time.sleep(PROFILE_CHECK_PAUSE_S)
    assert measured["writes"]["multipart_bytes"] == 8 * PART_BYTES


def test_a_slow_upload_probe_is_repeated_before_the_profile_is_refused(s3like: LocalEndpoint) -> None:
    # As for reads (test_endpoint.py): checked against twice its real pace, every attempt is too slow.
    with pytest.raises(RuntimeError, match=rf"fastest of {PROBE_ATTEMPTS} uploads"):
        check_profile(
            s3like.endpoint_url,
            BUCKET,
            PROBE_KEY,
            "s3like",
            S3LIKE_LATENCY_MS,
            2 * S3LIKE_BANDWIDTH_MBPS,
            writes=True,
        )


def test_s3like_paces_each_connection_on_its_own(s3like: LocalEndpoint) -> None:
    """Three connections uploading at once take about as long as one: the limit is per connection."""
    body = os.urandom(12 * 1024 * 1024)
    one_at_a_time_s = S3LIKE_LATENCY_MS / 1000 + len(body) / (S3LIKE_BANDWIDTH_MBPS * 1e6)
    elapsed: list[float] = []

    def upload(number: int) -> None:
        started = time.perf_counter()
        assert call(s3like, "PUT", f"/{BUCKET}/parallel-{number}", body)[0] == 200
        elapsed.append(time.perf_counter() - started)

    threads = [threading.Thread(target=upload, args=(number,)) for number in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(elapsed) == 3
    # Each at most 2x a lone upload's time (three sharing one limit would take 3x); never much faster.
    assert all(0.85 * one_at_a_time_s <= seconds <= 2.0 * one_at_a_time_s for seconds in elapsed), elapsed


def test_fast_writes_are_not_shaped(fast: LocalEndpoint) -> None:
    from benchmarks.endpoint.verify_writes import verify_writes

    url = urlsplit(fast.endpoint_url)
    connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=30)
    try:
        measured = verify_writes(connection, BUCKET)
    finally:
        connection.close()
    assert measured["put_latency_ms"] < S3LIKE_LATENCY_MS / 2
