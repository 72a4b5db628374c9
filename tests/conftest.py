"""Shared fixtures. Integration tests talk to a real moto S3 server started here, on loopback."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import boto3
import pytest

from tests.s3_server import MotoServer

try:
    import torchdata.nodes  # noqa: F401
except ImportError:
    # tests/nodes needs torchdata >= 0.10; scripts/test.sh runs it with torchdata 0.11 on the path
    # (scripts/torchdata-generations.sh), after the main run's torchdata 0.9.
    collect_ignore = ["nodes"]

TEST_ACCESS_KEY = "testing-access-key"
TEST_SECRET_KEY = "testing-secret-key"

# Nothing in the tests may ever reach a real AWS service or instance metadata.
_SCRUBBED = [
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "S3_ENDPOINT_URL",
    "S3_USE_HTTPS",
    "S3_VERIFY_SSL",
    "AWS_CA_BUNDLE",
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "NO_PROXY",
    "no_proxy",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_MAX_ATTEMPTS",
    "AWS_RETRY_MODE",
]


@pytest.fixture(autouse=True)
def isolated_aws_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    for name in _SCRUBBED:
        monkeypatch.delenv(name, raising=False)
    empty = tmp_path_factory.mktemp("aws-config")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(empty / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(empty / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", TEST_ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", TEST_SECRET_KEY)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """A failed test that used a moto server gets the server's own account of its errors in its report: a
    5xx answer reaches the client only as a status, and the traceback behind it is in the server's log."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if not report.failed:
        return
    for name, value in getattr(item, "funcargs", {}).items():
        if isinstance(value, MotoServer) and not value.log.closed:
            errors = value.server_errors()
            if errors:
                report.sections.append((f"{name} (moto) errors", errors))


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    server = MotoServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_endpoint(moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch) -> str:
    """The URL of a freshly reset server, also exported as AWS_ENDPOINT_URL for the code under test."""
    moto_server.reset()
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server.endpoint_url)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    return moto_server.endpoint_url


@pytest.fixture
def boto_s3(s3_endpoint: str):  # type: ignore[no-untyped-def]
    """A boto3 client on the same server, used to arrange data (never to check our results against itself)."""
    return boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        region_name="us-east-1",
        aws_access_key_id=TEST_ACCESS_KEY,
        aws_secret_access_key=TEST_SECRET_KEY,
    )


_bucket_numbers = itertools.count()


@pytest.fixture
def bucket(boto_s3) -> str:  # type: ignore[no-untyped-def]
    name = f"bucket-{os.getpid()}-{next(_bucket_numbers)}"
    boto_s3.create_bucket(Bucket=name)
    return name
