"""S3Client.copy: S3's CopyObject on a real S3-protocol server, the bytes never passing through the client."""

from __future__ import annotations

import pytest

from torchdata_s3 import S3Client, S3Config, S3FileNotFoundError


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
