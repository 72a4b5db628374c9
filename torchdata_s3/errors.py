"""Exceptions raised by torchdata_s3.

Every failure of an S3 request surfaces as an :class:`S3Error` (an :class:`OSError`), mixed in with the
builtin class a caller would naturally catch:

==============================  ==========================================  ==================================
class                           also a                                      raised for
==============================  ==========================================  ==================================
:class:`S3FileNotFoundError`    :class:`FileNotFoundError`                  NoSuchKey, NoSuchBucket, HTTP 404
:class:`S3PermissionError`      :class:`PermissionError`                    AccessDenied, bad or missing
                                                                            credentials, HTTP 403
:class:`S3TimeoutError`         :class:`TimeoutError`                       no progress within
                                                                            ``request_timeout_ms``
:class:`S3NetworkError`         :class:`ConnectionError`                    DNS, connect, TLS, dropped
                                                                            connections (after retries)
:class:`S3IntegrityError`       :class:`S3Error`                            a body shorter than announced, or
                                                                            the object changed mid-read
:class:`S3Error`                :class:`OSError`                            anything else (e.g. SlowDown after
                                                                            every retry)
==============================  ==========================================  ==================================

A malformed ``s3://`` URL raises :class:`InvalidS3UrlError`, a :class:`ValueError`.

All of them can be built from a message alone and pickle with their attributes, so they cross
DataLoader worker processes intact. Messages name the URL and never contain credentials.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "InvalidS3UrlError",
    "S3Error",
    "S3FileNotFoundError",
    "S3IntegrityError",
    "S3NetworkError",
    "S3PermissionError",
    "S3TimeoutError",
]


class InvalidS3UrlError(ValueError):
    """The string is not a usable ``s3://bucket/key`` URL."""


class S3Error(OSError):
    """A failed S3 request.

    Attributes:
        url: ``s3://bucket/key`` (or prefix) the request was for.
        operation: S3 operation, e.g. ``"GetObject"`` or ``"ListObjectsV2"``.
        http_status: HTTP status of the failed answer; 0 if none was received.
        s3_error_code: the ``<Code>`` of S3's error document, e.g. ``"NoSuchKey"``; empty if none.
        crt_error: name of the AWS CRT error, e.g. ``"AWS_IO_SOCKET_CONNECTION_REFUSED"``.
    """

    def __init__(
        self,
        message: str,
        *,
        url: str = "",
        operation: str = "",
        http_status: int = 0,
        s3_error_code: str = "",
        crt_error: str = "",
    ) -> None:
        super().__init__(message)
        self.url = url
        self.operation = operation
        self.http_status = http_status
        self.s3_error_code = s3_error_code
        self.crt_error = crt_error

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""

    def __reduce__(self) -> tuple[Any, ...]:
        fields = {
            "url": self.url,
            "operation": self.operation,
            "http_status": self.http_status,
            "s3_error_code": self.s3_error_code,
            "crt_error": self.crt_error,
        }
        return (_rebuild, (type(self), str(self), fields))


def _rebuild(cls: type, message: str, fields: dict) -> S3Error:
    return cls(message, **fields)


class S3FileNotFoundError(S3Error, FileNotFoundError):
    """The bucket or the key does not exist."""


class S3PermissionError(S3Error, PermissionError):
    """Access was denied, or no valid credentials were found."""


class S3NetworkError(S3Error, ConnectionError):
    """The endpoint could not be reached or the connection failed, after every retry."""


class S3TimeoutError(S3NetworkError, TimeoutError):
    """No progress within ``request_timeout_ms``."""


class S3IntegrityError(S3Error):
    """The bytes received cannot be trusted (short body, object changed during the read, ...)."""


_NOT_FOUND_CODES = {"NoSuchKey", "NoSuchBucket", "NotFound"}
_PERMISSION_CODES = {
    "AccessDenied",
    "AllAccessDisabled",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "InvalidToken",
    "TokenRefreshRequired",
    "AccountProblem",
}
_NETWORK_PREFIXES = ("AWS_IO_", "AWS_ERROR_HTTP_")


def _classify(info: dict) -> tuple[type, str]:
    """Picks the exception class and a hint that tells the user what to do."""
    kind = info["kind"]
    code = info["s3_error_code"]
    status = info["http_status"]
    crt = info["crt_error_name"]
    if kind == "timed_out":
        return (
            S3TimeoutError,
            "the endpoint stopped answering; raise request_timeout_ms or check the endpoint",
        )
    if kind in ("short_body", "out_of_order") or crt == "AWS_ERROR_S3_OBJECT_MODIFIED":
        return S3IntegrityError, "the object was not received intact; it may have been overwritten while read"
    if code in _NOT_FOUND_CODES or status == 404:
        return S3FileNotFoundError, "check the bucket name and the key"
    if code in _PERMISSION_CODES or status == 403 or crt.startswith("AWS_AUTH_"):
        return S3PermissionError, (
            "check the credentials (AWS_PROFILE, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
            "or anonymous=True for public buckets) and the bucket policy"
        )
    if status == 0 and crt.startswith(_NETWORK_PREFIXES):
        if "TIMEOUT" in crt:
            return (
                S3TimeoutError,
                "the endpoint did not answer in time; check the endpoint URL and the network",
            )
        return S3NetworkError, "check the endpoint URL, the network and proxy settings"
    if code == "SlowDown" or crt == "AWS_ERROR_S3_SLOW_DOWN":
        return (
            S3Error,
            "S3 is throttling requests even after retries; spread keys across prefixes or slow down",
        )
    return S3Error, ""


def error_from_native(info: dict) -> S3Error:
    """Builds the exception for one failed request from what the native core reports (a dict)."""
    cls, hint = _classify(info)
    url = f"s3://{info['bucket']}/{info['key']}"
    what = info["s3_error_code"] or info["detail"] or info["crt_error_name"]
    parts = [f"{info['operation']} {url} failed: {what}"]
    if info["http_status"]:
        parts.append(f"(HTTP {info['http_status']})")
    if info["s3_error_message"]:
        parts.append(f"- {info['s3_error_message']}")
    elif info["crt_error_message"] and info["kind"] == "crt":
        parts.append(f"- {info['crt_error_message']}")
    message = " ".join(parts).rstrip(".")
    if hint:
        message += f". {hint[0].upper()}{hint[1:]}."
    return cls(
        message,
        url=url,
        operation=info["operation"],
        http_status=info["http_status"],
        s3_error_code=info["s3_error_code"],
        crt_error=info["crt_error_name"],
    )
