"""S3Client.copy: S3's CopyObject on a real S3-protocol server, the bytes never passing through the client."""

from __future__ import annotations

import pytest

from tests.fault_proxy import Fault, FaultProxy, operation_is
from torchdata_s3 import S3Client, S3Config, S3Error, S3FileNotFoundError


def test_copy_is_done_by_the_server_across_buckets_and_odd_keys(boto_s3, bucket: str, moto_server) -> None:  # type: ignore[no-untyped-def]
    boto_s3.put_object(Bucket=bucket, Key="src/a b+c%d é", Body=b"copied by S3")
    boto_s3.create_bucket(Bucket=f"{bucket}-other")
    client = S3Client(S3Config.resolve())
    before = len(moto_server.logged_requests())
    client.copy(f"s3://{bucket}/src/a b+c%d é", f"s3://{bucket}-other/dst/é?#")
    sent = moto_server.logged_requests()[before:]
    assert boto_s3.get_object(Bucket=f"{bucket}-other", Key="dst/é?#")["Body"].read() == b"copied by S3"
    assert not [line for line in sent if line.startswith("GET ")], sent  # nothing read through us
    assert [line.split()[0] for line in sent] == ["HEAD", "PUT"], sent  # the source's size, then CopyObject


def test_a_missing_source_raises_file_not_found_naming_the_source(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    client = S3Client(S3Config.resolve())
    with pytest.raises(
        S3FileNotFoundError, match=f"the source s3://{bucket}/nothing does not exist"
    ) as raised:
        client.copy(f"s3://{bucket}/nothing", f"s3://{bucket}/dst")
    assert raised.value.url == f"s3://{bucket}/nothing"
    with pytest.raises(S3FileNotFoundError):
        client.copy(f"s3://{bucket}-missing/nothing", f"s3://{bucket}/dst")
    boto_s3.put_object(Bucket=bucket, Key="src", Body=b"x")
    with pytest.raises(S3FileNotFoundError, match=f"{bucket}-missing"):  # the destination's bucket is missing
        client.copy(f"s3://{bucket}/src", f"s3://{bucket}-missing/dst")


def test_a_silent_copy_is_waited_for_not_sent_again(boto_s3, bucket: str, moto_server) -> None:  # type: ignore[no-untyped-def]
    # request_timeout_ms 3000: a connection that moves no byte for 1 s is dropped, but a copy's answer is
    # given completion_timeout_ms: the store copies the whole object before it answers.
    boto_s3.put_object(Bucket=bucket, Key="src", Body=b"copied silently")
    with FaultProxy(moto_server.port, slow_answer_s=3.0) as proxy:
        proxy.force(Fault.SLOW_ANSWER, 1, eligible=operation_is("CopyObject"))
        client = S3Client(S3Config.resolve(endpoint_url=proxy.endpoint_url, request_timeout_ms=3000))
        client.copy(f"s3://{bucket}/src", f"s3://{bucket}/dst")
        assert proxy.injected == {Fault.SLOW_ANSWER: 1}
        assert [r.method for r in proxy.records] == ["HEAD", "PUT"]
    assert boto_s3.get_object(Bucket=bucket, Key="dst")["Body"].read() == b"copied silently"


def test_a_copy_without_any_answer_raises_naming_the_destination(boto_s3, bucket: str, moto_server) -> None:  # type: ignore[no-untyped-def]
    # Every attempt's connection is dropped before an answer: the CRT has no response headers to report.
    boto_s3.put_object(Bucket=bucket, Key="src", Body=b"never copied")
    with FaultProxy(moto_server.port) as proxy:
        proxy.force(Fault.DROP, 10, eligible=operation_is("CopyObject"))
        client = S3Client(S3Config.resolve(endpoint_url=proxy.endpoint_url, max_retries=1))
        with pytest.raises(S3Error, match=f"s3://{bucket}/dst"):
            client.copy(f"s3://{bucket}/src", f"s3://{bucket}/dst")
        assert proxy.injected == {Fault.DROP: 2}
    assert "Contents" not in boto_s3.list_objects_v2(Bucket=bucket, Prefix="dst")
