"""The connection tuner on a real client (csrc/connection_tuner.h, and the CRT patch that lets it move the
client's limit while it runs: cmake/AwsCrtPatches.cmake). GET parts and upload parts feed it; what it decides
from a rate is tests/unit/test_connection_tuner.py."""

from __future__ import annotations

import os

import pytest

from torchdata_s3 import S3Client, S3Config
from torchdata_s3.client import native_client

pytestmark = pytest.mark.integration

KiB = 1024
MiB = 1024 * KiB
CONFIGURED = 125  # the CRT's number for the default throughput target (50 Gbps)


def test_reads_feed_the_tuner_and_every_byte_arrives(boto_s3, bucket: str, s3_endpoint: str) -> None:  # type: ignore[no-untyped-def]
    bodies = {f"object-{index}": os.urandom(4 * MiB) for index in range(3)}
    for key, body in bodies.items():
        boto_s3.put_object(Bucket=bucket, Key=key, Body=body)
    # 64 KiB parts: 192 deliveries, enough for windows of 32 (the most a window asks for, at 125 connections).
    config = S3Config.resolve(endpoint_url=s3_endpoint, part_size_bytes=64 * KiB, tune_connections=True)
    client = S3Client(config)
    for key, body in bodies.items():
        with client.open(f"s3://{bucket}/{key}") as stream:
            assert stream.read() == body
    native = native_client(config)
    tuner = native.connection_tuner
    assert tuner is not None
    assert tuner.windows >= 1
    assert 2 <= native.connection_limit == tuner.limit <= CONFIGURED


def test_an_upload_alone_feeds_the_tuner(boto_s3, bucket: str, s3_endpoint: str) -> None:  # type: ignore[no-untyped-def]
    # A checkpoint save reads nothing: its parts must still be measured, or the limit learned while reading
    # would hold for writing.
    # Eight connections: windows of eight deliveries, which twelve parts fill.
    config = S3Config.resolve(
        endpoint_url=s3_endpoint,
        part_size_bytes=5 * MiB,
        multipart_threshold_bytes=5 * MiB,
        max_connections=8,
        tune_connections=True,
    )
    body = os.urandom(12 * 5 * MiB)
    with S3Client(config).open(f"s3://{bucket}/checkpoint.bin", "wb") as writer:
        writer.write(body)
    tuner = native_client(config).connection_tuner
    assert tuner is not None and tuner.windows >= 1
    assert boto_s3.get_object(Bucket=bucket, Key="checkpoint.bin")["Body"].read() == body


def test_without_tuning_the_client_uses_its_configured_number(s3_endpoint: str) -> None:
    untuned = native_client(S3Config.resolve(endpoint_url=s3_endpoint))  # tune_connections is off by default
    assert untuned.connection_tuner is None
    assert untuned.connection_limit == CONFIGURED
    capped = native_client(
        S3Config.resolve(endpoint_url=s3_endpoint, tune_connections=False, max_connections=3)
    )
    assert capped.connection_limit == 3


def test_a_tuned_client_starts_from_its_configured_number(s3_endpoint: str) -> None:
    capped = native_client(
        S3Config.resolve(endpoint_url=s3_endpoint, max_connections=7, tune_connections=True)
    )
    assert capped.connection_tuner is not None
    assert capped.connection_limit == 7  # nothing measured yet: no limit below the configured number


def test_tune_connections_must_be_a_bool(s3_endpoint: str) -> None:
    with pytest.raises(ValueError, match="tune_connections must be True or False, got 'yes'"):
        S3Config.resolve(endpoint_url=s3_endpoint, tune_connections="yes")  # type: ignore[arg-type]
