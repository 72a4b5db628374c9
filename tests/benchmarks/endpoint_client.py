"""A boto3 client for the embedded endpoint, as the endpoint tests use it: path style, dummy credentials
(the endpoint ignores them), one attempt (a test sees the endpoint's first answer)."""

from __future__ import annotations

import boto3
from botocore.config import Config

from benchmarks.endpoint.nginx import LocalEndpoint


def boto3_client(endpoint: LocalEndpoint):  # type: ignore[no-untyped-def]
    return boto3.client(
        "s3",
        endpoint_url=endpoint.endpoint_url,
        aws_access_key_id="x",
        aws_secret_access_key="y",
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )
