import pickle

import pytest

from torchdata_s3 import (
    S3Error,
    S3FileNotFoundError,
    S3IntegrityError,
    S3NetworkError,
    S3PermissionError,
    S3TimeoutError,
)
from torchdata_s3.errors import error_from_native


def native_info(**fields: object) -> dict:
    info = {
        "kind": "crt",
        "crt_error_code": 0,
        "crt_error_name": "AWS_ERROR_S3_INVALID_RESPONSE_STATUS",
        "crt_error_message": "Invalid response status from request",
        "http_status": 0,
        "s3_error_code": "",
        "s3_error_message": "",
        "operation": "GetObject",
        "bucket": "bkt",
        "key": "dir/file.bin",
        "detail": "",
        "tls_endpoint": "",
        "tls_reason": "",
        "tls_reason_message": "",
        "proxy": "",
        "proxy_status": 0,
    }
    info.update(fields)
    return info


@pytest.mark.parametrize(
    ("fields", "expected", "builtin"),
    [
        ({"http_status": 404, "s3_error_code": "NoSuchKey"}, S3FileNotFoundError, FileNotFoundError),
        ({"http_status": 404, "s3_error_code": "NoSuchBucket"}, S3FileNotFoundError, FileNotFoundError),
        ({"http_status": 404}, S3FileNotFoundError, FileNotFoundError),
        ({"http_status": 403, "s3_error_code": "AccessDenied"}, S3PermissionError, PermissionError),
        ({"http_status": 403, "s3_error_code": "InvalidAccessKeyId"}, S3PermissionError, PermissionError),
        ({"crt_error_name": "AWS_AUTH_SIGNING_NO_CREDENTIALS"}, S3PermissionError, PermissionError),
        ({"crt_error_name": "AWS_IO_SOCKET_CONNECTION_REFUSED"}, S3NetworkError, ConnectionError),
        ({"crt_error_name": "AWS_IO_DNS_INVALID_NAME"}, S3NetworkError, ConnectionError),
        ({"crt_error_name": "AWS_IO_SOCKET_TIMEOUT"}, S3TimeoutError, TimeoutError),
        ({"kind": "timed_out", "detail": "no data within 10 ms"}, S3TimeoutError, TimeoutError),
        ({"kind": "short_body", "detail": "the body ended after 1 of 2 bytes"}, S3IntegrityError, S3Error),
        ({"crt_error_name": "AWS_ERROR_S3_OBJECT_MODIFIED"}, S3IntegrityError, S3Error),
        ({"http_status": 503, "s3_error_code": "SlowDown"}, S3Error, OSError),
        ({"http_status": 500, "s3_error_code": "InternalError"}, S3Error, OSError),
        # What the CRT reports once every retry failed: no HTTP status any more, only its error name.
        ({"crt_error_name": "AWS_ERROR_S3_SLOW_DOWN"}, S3Error, OSError),
        ({"crt_error_name": "AWS_ERROR_S3_INTERNAL_ERROR"}, S3Error, OSError),
        ({"crt_error_name": "AWS_IO_SOCKET_CLOSED"}, S3NetworkError, ConnectionError),
        ({"crt_error_name": "AWS_ERROR_HTTP_CHANNEL_THROUGHPUT_FAILURE"}, S3TimeoutError, TimeoutError),
    ],
)
def test_classification(fields: dict, expected: type, builtin: type) -> None:
    error = error_from_native(native_info(**fields))
    assert type(error) is expected
    assert isinstance(error, builtin) and isinstance(error, OSError)
    assert "s3://bkt/dir/file.bin" in str(error)
    assert error.url == "s3://bkt/dir/file.bin"


def test_message_names_code_status_and_remedy() -> None:
    error = error_from_native(
        native_info(
            http_status=404, s3_error_code="NoSuchKey", s3_error_message="The specified key does not exist."
        )
    )
    assert str(error) == (
        "GetObject s3://bkt/dir/file.bin failed: NoSuchKey (HTTP 404) - The specified key does not exist. "
        "Check the bucket name and the key."
    )
    assert (error.s3_error_code, error.http_status, error.operation) == ("NoSuchKey", 404, "GetObject")


def test_errors_pickle_with_their_attributes() -> None:
    error = error_from_native(native_info(http_status=403, s3_error_code="AccessDenied"))
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is S3PermissionError
    assert (copy.url, copy.http_status, copy.s3_error_code, str(copy)) == (
        error.url,
        403,
        "AccessDenied",
        str(error),
    )


@pytest.mark.parametrize(
    "cls", [S3Error, S3FileNotFoundError, S3PermissionError, S3NetworkError, S3TimeoutError]
)
def test_constructible_from_a_message_alone(cls: type) -> None:
    # DataLoader re-raises worker exceptions as exc_type(message).
    assert str(cls("worker said so")) == "worker said so"


@pytest.mark.parametrize("crt_error", ["AWS_ERROR_S3_SLOW_DOWN", "AWS_ERROR_S3_INTERNAL_ERROR"])
def test_exhausted_retries_are_named_as_such(crt_error: str) -> None:
    message = str(error_from_native(native_info(crt_error_name=crt_error)))
    assert "retries" in message or "retry" in message, message
