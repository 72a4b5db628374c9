"""Faults between a writer and a real S3-protocol server (moto behind tests/fault_proxy.py): every object
either lands complete and byte-exact, or the writer raises and then neither the object nor a pending
multipart upload exists."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from typing import Optional

import pytest

from tests.fault_proxy import ErrorAnswer, Fault, FaultProxy, ProxiedRequest, operation_is
from tests.s3_server import MotoServer
from torchdata_s3 import S3Client, S3Config, S3Error, S3ObjectExistsError, S3TimeoutError
from torchdata_s3.url import S3Url
from torchdata_s3.writer import multipart_etag

pytestmark = pytest.mark.integration

MiB = 1024 * 1024
# 11 MiB: CreateMultipartUpload, two UploadParts (8 MiB parts; S3's minimum is 5 MiB), Complete.
MULTIPART_SIZE = 11 * MiB
SINGLE_SIZE = 100_000


@pytest.fixture
def proxy(moto_server: MotoServer, s3_endpoint: str) -> Iterator[FaultProxy]:
    with FaultProxy(moto_server.port, seed=3, stall_s=30) as running:
        yield running


def payload(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


def is_upload(request: ProxiedRequest) -> bool:
    return request.s3_operation in (
        "CreateMultipartUpload",
        "UploadPart",
        "CompleteMultipartUpload",
        "PutObject",
    )


def open_writer(  # type: ignore[no-untyped-def]
    proxy: FaultProxy, url: str, overwrite: bool = True, checksum: Optional[str] = None, **options: object
):
    """A writer through the proxy, streaming (multipart) past 1 MiB."""
    config = S3Config.resolve(endpoint_url=proxy.endpoint_url, multipart_threshold_bytes=MiB, **options)
    return S3Client(config).open(url, "wb", overwrite=overwrite, checksum=checksum)


def write(
    proxy: FaultProxy, url: str, data: bytes, checksum: Optional[str] = None, **options: object
) -> None:
    # Forced SlowDowns stand for any retryable failure here (throttling itself: test_throttling.py).
    options.setdefault("max_throttle_retries", options.get("max_retries", S3Config.max_retries))
    with open_writer(proxy, url, checksum=checksum, **options) as writer:
        writer.write(data)


def state_of(boto_s3, bucket: str) -> tuple[dict[str, bytes], list[str]]:  # type: ignore[no-untyped-def]
    objects = {
        entry["Key"]: boto_s3.get_object(Bucket=bucket, Key=entry["Key"])["Body"].read()
        for entry in boto_s3.list_objects_v2(Bucket=bucket).get("Contents", [])
    }
    pending = [upload["Key"] for upload in boto_s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])]
    return objects, pending


REQUESTS = [
    ("CreateMultipartUpload", MULTIPART_SIZE),
    ("UploadPart", MULTIPART_SIZE),
    ("CompleteMultipartUpload", MULTIPART_SIZE),
    ("PutObject", SINGLE_SIZE),
]


# A body cut off applies to the requests that carry the object's bytes.
ONE_FAULT_CASES = [
    (operation, size, fault)
    for operation, size in REQUESTS
    for fault in (Fault.SLOW_DOWN, Fault.INTERNAL_ERROR, Fault.DROP, Fault.CUT_REQUEST)
    if fault is not Fault.CUT_REQUEST or operation in ("UploadPart", "PutObject")
]


@pytest.mark.parametrize(
    ("operation", "size", "fault"), ONE_FAULT_CASES, ids=[f"{op}-{f.value}" for op, _, f in ONE_FAULT_CASES]
)
def test_one_fault_is_retried_and_the_object_lands_exact(
    boto_s3, bucket: str, proxy: FaultProxy, fault: Fault, operation: str, size: int
) -> None:  # type: ignore[no-untyped-def]
    data = payload(size, seed=size)
    proxy.force(fault, 1, eligible=operation_is(operation))
    write(proxy, f"s3://{bucket}/obj", data)
    assert proxy.injected == {fault: 1}
    assert state_of(boto_s3, bucket) == ({"obj": data}, [])


@pytest.mark.parametrize("fault", [Fault.SLOW_DOWN, Fault.INTERNAL_ERROR, Fault.DROP])
@pytest.mark.parametrize(("operation", "size"), REQUESTS, ids=[name for name, _ in REQUESTS])
def test_a_persistent_fault_raises_and_leaves_nothing(
    boto_s3, bucket: str, proxy: FaultProxy, fault: Fault, operation: str, size: int
) -> None:  # type: ignore[no-untyped-def]
    proxy.force(fault, 10, eligible=operation_is(operation))
    with pytest.raises(S3Error, match=f"s3://{bucket}/obj"):
        write(proxy, f"s3://{bucket}/obj", payload(size, seed=1), max_retries=1)
    assert state_of(boto_s3, bucket) == ({}, [])


def test_random_faults_on_many_uploads_never_leave_a_wrong_or_partial_object(
    boto_s3, bucket: str, proxy: FaultProxy
) -> None:  # type: ignore[no-untyped-def]
    proxy.set_rates(
        {Fault.SLOW_DOWN: 0.1, Fault.INTERNAL_ERROR: 0.05, Fault.DROP: 0.05, Fault.CUT_REQUEST: 0.05},
        eligible=is_upload,
    )
    written: dict[str, bytes] = {}
    failed = 0
    for index in range(12):
        size = MULTIPART_SIZE if index % 3 == 0 else SINGLE_SIZE + index
        data = payload(size, seed=100 + index)
        try:
            write(proxy, f"s3://{bucket}/k{index}", data, max_retries=2)
            written[f"k{index}"] = data
        except S3Error:
            failed += 1
    assert sum(proxy.injected.values()) > 0, "the faults must really happen"
    objects, pending = state_of(boto_s3, bucket)
    assert pending == []
    assert objects == written, f"{failed} writers raised; every other object must be there, byte-exact"


# ---- checksums, checked at the wire (moto does not verify them; S3 does) --------------------------------


def decode_aws_chunked(body: bytes) -> tuple[bytes, dict[str, str]]:
    """The payload and the trailer of an ``aws-chunked`` request body (unsigned chunks, as the CRT sends)."""
    payload, rest = bytearray(), body
    while True:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        payload += rest[:size]
        assert rest[size : size + 2] == b"\r\n"
        rest = rest[size + 2 :]
    trailer = {}
    for line in rest.split(b"\r\n"):
        if line:
            name, _, value = line.decode().partition(":")
            trailer[name.strip().lower()] = value.strip()
    return bytes(payload), trailer


@pytest.mark.parametrize("algorithm", ["crc32c", "crc64nvme"])
@pytest.mark.parametrize("size", [SINGLE_SIZE, MULTIPART_SIZE], ids=["single-put", "multipart"])
def test_checksums_sent_match_the_bytes(
    boto_s3, bucket: str, proxy: FaultProxy, algorithm: str, size: int
) -> None:  # type: ignore[no-untyped-def]
    import base64

    from torchdata_s3 import _core

    proxy.record_bodies = True
    data = payload(size, seed=9)
    write(proxy, f"s3://{bucket}/sum", data, checksum=algorithm)
    assert state_of(boto_s3, bucket) == ({"sum": data}, [])

    compute, width = (_core.crc32c, 4) if algorithm == "crc32c" else (_core.crc64nvme, 8)
    sent = bytearray()
    uploads = [r for r in proxy.records if r.method == "PUT" and r.status == 200]
    assert uploads
    # Parts travel in parallel: put them back in order (a single PutObject has no part number).
    uploads.sort(
        key=lambda r: int(dict(p.partition("=")[::2] for p in r.query.split("&")).get("partNumber", 0))
    )
    for record in uploads:
        assert record.headers.get("x-amz-trailer") == f"x-amz-checksum-{algorithm}"
        part, trailer = decode_aws_chunked(record.body)
        expected = base64.b64encode(compute(part).to_bytes(width, "big")).decode()
        assert trailer[f"x-amz-checksum-{algorithm}"] == expected
        sent += part
    assert bytes(sent) == data


@pytest.mark.parametrize(("operation", "size"), REQUESTS, ids=[name for name, _ in REQUESTS])
def test_an_endpoint_that_stops_answering_fails_the_writer_in_bounded_time(
    boto_s3, bucket: str, proxy: FaultProxy, operation: str, size: int
) -> None:  # type: ignore[no-untyped-def]
    # request_timeout_ms 3000 -> connections silent for 1 s are dropped, a Complete's after 2 s
    # (completion_timeout_ms); one retry, silent too (every attempt of every part is silenced).
    proxy.force(Fault.NO_ANSWER, 10, eligible=operation_is(operation))
    started = time.monotonic()
    with pytest.raises(S3Error, match=f"s3://{bucket}/obj") as raised:
        write(
            proxy,
            f"s3://{bucket}/obj",
            payload(size, seed=2),
            max_retries=1,
            request_timeout_ms=3000,
            completion_timeout_ms=2000,
        )
    assert time.monotonic() - started < 20
    if operation == "CompleteMultipartUpload":
        assert isinstance(raised.value, S3TimeoutError)
        assert "completion_timeout_ms" in str(raised.value)
    assert state_of(boto_s3, bucket) == ({}, [])


# ---- a store that works silently before it answers ------------------------------------------------------


def completes(proxy: FaultProxy) -> list[int]:
    """The status of every CompleteMultipartUpload the proxy saw, in order."""
    return [r.status for r in proxy.records if r.operation == "CompleteMultipartUpload"]


def test_a_silent_completion_is_waited_for_not_sent_again(boto_s3, bucket: str, proxy: FaultProxy) -> None:  # type: ignore[no-untyped-def]
    # request_timeout_ms 3000: a connection that moves no byte for 1 s is dropped. The Complete's answer
    # comes 3 s after moto completed the upload. Sent again, a Complete can fail although the first one
    # completed the upload (S3: NoSuchUpload; moto answered 500 to one that came while it was completing),
    # and the writer would raise with the object in place.
    proxy.slow_answer_s = 3.0
    proxy.force(Fault.SLOW_ANSWER, 1, eligible=operation_is("CompleteMultipartUpload"))
    data = payload(MULTIPART_SIZE, seed=5)
    write(proxy, f"s3://{bucket}/obj", data, request_timeout_ms=3000)
    assert proxy.injected == {Fault.SLOW_ANSWER: 1}
    assert completes(proxy) == [200]
    assert state_of(boto_s3, bucket) == ({"obj": data}, [])


def test_a_completion_slower_than_its_timeout_is_sent_again(boto_s3, bucket: str, proxy: FaultProxy) -> None:  # type: ignore[no-untyped-def]
    # The first Complete is never answered: after completion_timeout_ms it is cut and sent again, and the
    # second one (which moto sees first) completes the upload.
    proxy.force(Fault.NO_ANSWER, 1, eligible=operation_is("CompleteMultipartUpload"))
    data = payload(MULTIPART_SIZE, seed=6)
    started = time.monotonic()
    write(proxy, f"s3://{bucket}/obj", data, request_timeout_ms=3000, completion_timeout_ms=1500)
    assert 1.5 <= time.monotonic() - started < 20
    assert completes(proxy) == [0, 200]
    assert state_of(boto_s3, bucket) == ({"obj": data}, [])


# ---- a completion whose answer was lost -------------------------------------------------------------------

# What S3 answers a CompleteMultipartUpload sent again after the first one completed the upload. moto answers
# 200 instead (the test above), so the proxy gives S3's answer to the second one.
NO_SUCH_UPLOAD = ErrorAnswer(
    404,
    "Not Found",
    "NoSuchUpload",
    "The specified upload does not exist. The upload ID may be invalid, or the upload may have been "
    "aborted or completed.",
)


# What S3 may answer it instead for a writer that may not overwrite (If-None-Match: *): the object exists now.
OBJECT_EXISTS = ErrorAnswer(
    412,
    "Precondition Failed",
    "PreconditionFailed",
    "At least one of the pre-conditions you specified did not hold",
)


def refuse_completes_after_the_first(proxy: FaultProxy, answer: ErrorAnswer) -> None:
    seen = 0

    def gate(request: ProxiedRequest) -> Optional[ErrorAnswer]:
        nonlocal seen
        if request.s3_operation != "CompleteMultipartUpload":
            return None
        seen += 1
        return answer if seen > 1 else None

    proxy.set_gate(gate)


@pytest.mark.parametrize(
    ("second_answer", "overwrite"),
    [(NO_SUCH_UPLOAD, True), (OBJECT_EXISTS, False)],
    ids=["no_such_upload", "exists_for_a_writer_that_may_not_overwrite"],
)
def test_a_completion_whose_answer_was_lost_is_found_complete(
    boto_s3, bucket: str, proxy: FaultProxy, second_answer: ErrorAnswer, overwrite: bool
) -> None:  # type: ignore[no-untyped-def]
    # The first Complete reaches moto, which completes the upload, but its answer is held back past
    # completion_timeout_ms: the CRT sends it again and gets NoSuchUpload (412 for overwrite=False, as the
    # object the first one made exists). The write succeeded, and the writer says so: the object in place has
    # the ETag S3 makes of this upload's parts.
    proxy.force(Fault.SLOW_ANSWER, 1, eligible=operation_is("CompleteMultipartUpload"))
    refuse_completes_after_the_first(proxy, second_answer)
    data = payload(MULTIPART_SIZE, seed=7)
    writer = open_writer(
        proxy, f"s3://{bucket}/obj", overwrite, request_timeout_ms=3000, completion_timeout_ms=1000
    )
    with writer:
        writer.write(data)
    assert proxy.injected == {Fault.SLOW_ANSWER: 1}
    assert proxy.refused == {second_answer.code: 1}
    assert state_of(boto_s3, bucket) == ({"obj": data}, [])
    assert writer.etag == boto_s3.head_object(Bucket=bucket, Key="obj")["ETag"]


def test_an_existing_object_still_refuses_a_writer_that_may_not_overwrite(
    boto_s3, bucket: str, proxy: FaultProxy
) -> None:  # type: ignore[no-untyped-def]
    # The object existed before: every Complete is refused 412 by moto itself, one answer lost on the way. Its
    # ETag is not this upload's, so the refusal stands.
    proxy.force(Fault.NO_ANSWER, 1, eligible=operation_is("CompleteMultipartUpload"))
    before = payload(MiB, seed=13)
    boto_s3.put_object(Bucket=bucket, Key="obj", Body=before)
    writer = open_writer(
        proxy, f"s3://{bucket}/obj", False, request_timeout_ms=3000, completion_timeout_ms=1000
    )
    with pytest.raises(S3ObjectExistsError), writer:
        writer.write(payload(MULTIPART_SIZE, seed=14))
    assert state_of(boto_s3, bucket) == ({"obj": before}, [])


@pytest.mark.parametrize("another_object", [False, True], ids=["nothing_in_place", "another_object_in_place"])
def test_no_such_upload_stands_without_this_uploads_object(
    boto_s3, bucket: str, proxy: FaultProxy, another_object: bool
) -> None:  # type: ignore[no-untyped-def]
    # The first Complete never reaches moto (no answer either), the second is answered NoSuchUpload: nothing
    # completed this upload. With nothing at the key, or another writer's object there (its ETag is not this
    # upload's), the writer raises that error and leaves nothing of its own behind.
    proxy.force(Fault.NO_ANSWER, 1, eligible=operation_is("CompleteMultipartUpload"))
    refuse_completes_after_the_first(proxy, NO_SUCH_UPLOAD)
    in_place = {}
    if another_object:
        in_place["obj"] = payload(MULTIPART_SIZE, seed=9)
        boto_s3.put_object(Bucket=bucket, Key="obj", Body=in_place["obj"])
    writer = open_writer(proxy, f"s3://{bucket}/obj", request_timeout_ms=3000, completion_timeout_ms=1000)
    with pytest.raises(S3Error) as raised, writer:
        writer.write(payload(MULTIPART_SIZE, seed=8))
    assert raised.value.s3_error_code == "NoSuchUpload"
    assert "aborted while it was written" in str(raised.value)
    assert state_of(boto_s3, bucket) == (in_place, [])


def test_the_parts_etags_make_the_etag_the_server_gives(boto_s3, bucket: str, proxy: FaultProxy) -> None:  # type: ignore[no-untyped-def]
    # What the recognition above rests on, against the server: the multipart ETag computed from the parts'
    # ETags as their UploadParts answered is the completed object's. (Asked with a HEAD: against moto the
    # CRT cannot read it from the completion's answer, see test_write.py.)
    client = S3Client(S3Config.resolve(endpoint_url=proxy.endpoint_url))
    native = client._native_for(S3Url(bucket, "obj"), "PutObject")
    upload = native.put_object(bucket, "obj")
    upload.write(payload(MULTIPART_SIZE, seed=11))
    upload.complete()
    etag = boto_s3.head_object(Bucket=bucket, Key="obj")["ETag"]
    numbers = [number for number, _etag in upload.part_etags()]
    assert numbers == list(range(1, MULTIPART_SIZE // S3Config.part_size_bytes + 2))
    assert multipart_etag([part for _number, part in upload.part_etags()]) == etag.strip('"')
    assert not upload.completion_unanswered
    single = native.put_object(bucket, "small", body=b"x")
    single.complete()
    assert single.part_etags() == []


def test_multipart_etag_needs_md5_etags() -> None:
    md5s = ['"0cc175b9c0f1b6a831c399e269772661"', "92eb5ffee6ae2fec3ad71c777531578f"]
    assert multipart_etag(md5s) == "96e024ba2074fe77e8e965ba43a704be-2"  # MD5 of the two binary MD5s, then 2
    assert multipart_etag([]) is None
    assert multipart_etag(['"not-an-md5"']) is None  # SSE-KMS and SSE-C ETags are not MD5s
    assert multipart_etag(["z" * 32]) is None
