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
:class:`S3NetworkError`         :class:`ConnectionError`                    DNS, connect, dropped connections
                                                                            (after retries); TLS handshakes
                                                                            (at once: not retried)
:class:`S3ObjectExistsError`    :class:`FileExistsError`                    a writer with ``overwrite=False``
                                                                            found the object (HTTP 412/409)
:class:`S3IntegrityError`       :class:`S3Error`                            a body shorter than announced, or
                                                                            the object changed mid-read
:class:`S3Error`                :class:`OSError`                            anything else (e.g. SlowDown after
                                                                            every retry)
==============================  ==========================================  ==================================

A malformed ``s3://`` URL raises :class:`InvalidS3UrlError`, a :class:`ValueError`.

``errno`` is ``ENOENT``, ``EACCES``, ``ETIMEDOUT`` and ``EEXIST`` for the not-found, permission, timeout and
exists classes (so ``except OSError as e: e.errno == errno.ENOENT`` works), None for the others.

All of them can be built from a message alone and pickle with their attributes, so they cross
DataLoader worker processes intact. Messages name the URL and never contain credentials. The full
catalogue (situation, class, message, remedy) is docs/errors.md.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any, ClassVar, Optional

__all__ = [
    "InvalidS3UrlError",
    "S3Error",
    "S3FileNotFoundError",
    "S3IntegrityError",
    "S3NetworkError",
    "S3ObjectExistsError",
    "S3PermissionError",
    "S3TimeoutError",
]


class InvalidS3UrlError(ValueError):
    """The string is not a usable ``s3://bucket/key`` URL."""


class S3Error(OSError, ValueError):
    """A failed S3 request.

    Also a :class:`ValueError`, as :class:`io.UnsupportedOperation` is both: the original torchdata loader
    raised ValueError for every failed object, and code written for it that catches ValueError keeps
    working.

    Attributes:
        url: ``s3://bucket/key`` (or prefix) the request was for.
        operation: S3 operation, e.g. ``"GetObject"`` or ``"ListObjectsV2"``.
        http_status: HTTP status of the failed answer; 0 if none was received.
        s3_error_code: the ``<Code>`` of S3's error document, e.g. ``"NoSuchKey"``; empty if none.
        crt_error: name of the AWS CRT error, e.g. ``"AWS_IO_SOCKET_CONNECTION_REFUSED"``.
        errno: the POSIX errno matching the class (see the module docstring), else None.
    """

    # Set on every instance (OSError's errno is otherwise None when built from a message alone).
    default_errno: ClassVar[Optional[int]] = None

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
        self.errno = self.default_errno
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

    default_errno = errno.ENOENT


class S3PermissionError(S3Error, PermissionError):
    """Access was denied, or no valid credentials were found."""

    default_errno = errno.EACCES


class S3NetworkError(S3Error, ConnectionError):
    """The endpoint could not be reached or the connection failed, after every retry."""


class S3TimeoutError(S3NetworkError, TimeoutError):
    """No progress within ``request_timeout_ms``."""

    default_errno = errno.ETIMEDOUT


class S3ObjectExistsError(S3Error, FileExistsError):
    """A writer opened with ``overwrite=False`` found the object already there (HTTP 412 or 409)."""

    default_errno = errno.EEXIST


class S3IntegrityError(S3Error):
    """The bytes received cannot be trusted (short body, object changed during the read, ...)."""


_WRITE_OPERATIONS = {"PutObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload"}
_NOT_FOUND_CODES = {"NoSuchKey", "NoSuchBucket", "NotFound"}

# How to provide credentials, for every "no credentials" message.
CREDENTIALS_HOW_TO = (
    "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (plus AWS_SESSION_TOKEN for temporary credentials), "
    "name a profile of the shared credentials file (AWS_PROFILE or profile=...), pass access_key_id= and "
    "secret_access_key=, or use anonymous=True for public objects"
)
# Where the container credentials endpoint is when only a path is given (the ECS agent's address).
_ECS_AGENT = "http://169.254.170.2"


def _sts_endpoint(environ: Mapping[str, str]) -> str:
    """Where the CRT's web identity provider asks STS, as the AWS CLI picks it, in words."""
    for variable in ("AWS_ENDPOINT_URL_STS", "AWS_ENDPOINT_URL"):
        if environ.get(variable, "").strip():
            note = "" if variable == "AWS_ENDPOINT_URL_STS" else "; set AWS_ENDPOINT_URL_STS if it is not STS"
            return f"{environ[variable].strip()} ({variable}{note})"
    region = environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or "<region>"
    return f"sts.{region}.amazonaws.com"


def no_credentials_hint(environ: Mapping[str, str]) -> str:
    """Why a request found no credentials to sign with, and what to do: the CRT's default chain asks the
    environment's keys, the shared files, then one of web identity, the container endpoint or instance
    metadata, as `environ` selects them; with nothing of that set, how to provide credentials."""
    web_identity_file = environ.get("AWS_WEB_IDENTITY_TOKEN_FILE")
    container_url = environ.get("AWS_CONTAINER_CREDENTIALS_FULL_URI")
    relative = environ.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
    if web_identity_file and environ.get("AWS_ROLE_ARN"):
        return (
            f"no valid credentials came from web identity (the token in {web_identity_file}, "
            f"AWS_WEB_IDENTITY_TOKEN_FILE, for the role {environ['AWS_ROLE_ARN']}, AWS_ROLE_ARN) through "
            f"STS at {_sts_endpoint(environ)}: check that the token file is there and current (the platform "
            "rotates it) and that STS is reachable from this process"
        )
    if container_url or relative:
        url, variable = (
            (container_url, "AWS_CONTAINER_CREDENTIALS_FULL_URI")
            if container_url
            else (_ECS_AGENT + str(relative), "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
        )
        return (
            f"no valid credentials came from the container credentials endpoint {url} ({variable}): it did "
            "not answer, answered an error, or its credentials had expired; check that the endpoint (the "
            "ECS or EKS Pod Identity agent) is running and reachable from this process"
        )
    if environ.get("AWS_EC2_METADATA_DISABLED", "false").lower() != "true":
        return (
            "no credentials were found, and the instance metadata service (169.254.169.254) gave none: on "
            f"EC2, check the instance's role and that the metadata service is reachable; elsewhere, "
            f"{CREDENTIALS_HOW_TO}"
        )
    return f"no credentials were found: {CREDENTIALS_HOW_TO}"


_PERMISSION_HINTS = {
    "AccessDenied": "the credentials were accepted but may not do this; check the IAM and bucket policies "
    "(anonymous requests reach only public objects)",
    "AllAccessDisabled": "all access to this object has been disabled by its owner",
    "AccountProblem": "the account has a problem that S3 will not serve; contact its owner",
    "InvalidAccessKeyId": "the endpoint does not know this access key id; check which credentials are in use "
    "(environment, profile, options) and that they belong to this endpoint",
    "SignatureDoesNotMatch": "the secret access key does not belong to this access key id; check the secret "
    "(and the session token of temporary credentials)",
    "InvalidToken": "the session token is malformed or does not belong to this access key id; "
    "refresh the temporary credentials",
    "ExpiredToken": "the session token has expired; refresh the temporary credentials",
    "TokenRefreshRequired": "the session token has expired; refresh the temporary credentials",
}
_PERMISSION_HINT = (
    "check the credentials (AWS_PROFILE, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
    "or anonymous=True for public buckets) and the bucket policy"
)
_REGION_CODES = {"PermanentRedirect", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException"}

# What to do about a certificate that is not accepted, for every TLS message that needs it.
TLS_TRUST_HOW_TO = (
    "if the endpoint's certificate comes from a private CA or a TLS-inspecting proxy, point ca_file= (or "
    "AWS_CA_BUNDLE) at that CA's PEM file; verify_ssl=False (or S3_VERIFY_SSL=0) turns verification off"
)
# s2n's reason for a failed handshake -> (the cause in words, what to do).
_TLS_CAUSES = {
    "S2N_ERR_CERT_UNTRUSTED": ("certificate not trusted", TLS_TRUST_HOW_TO),
    "S2N_ERR_CERT_INVALID_HOSTNAME": (
        "certificate is for another host",
        "use the host name the certificate was issued for in endpoint_url, or a certificate that names this "
        "host; verify_ssl=False (or S3_VERIFY_SSL=0) turns verification off",
    ),
    "S2N_ERR_CERT_EXPIRED": (
        "certificate expired",
        "renew the endpoint's certificate, or check this machine's clock; verify_ssl=False (or "
        "S3_VERIFY_SSL=0) turns verification off",
    ),
    "S2N_ERR_CERT_NOT_YET_VALID": (
        "certificate not valid yet",
        "check this machine's clock, or renew the endpoint's certificate; verify_ssl=False (or "
        "S3_VERIFY_SSL=0) turns verification off",
    ),
}
# A reply that is not TLS at all: NOT_TLS is ours (tls_handshake_hook.h: the server's first bytes are no TLS
# record); the s2n reasons are what s2n finds where a TLS record must be.
_NOT_TLS_REASONS = {"NOT_TLS", "S2N_ERR_BAD_MESSAGE", "S2N_ERR_RECORD_LIMIT", "S2N_ERR_BAD_KEY_SHARE"}
_NOT_TLS = (
    "the endpoint does not speak TLS: is it http://?",
    "if it serves plain HTTP, use an http:// endpoint_url (or S3_USE_HTTPS=0)",
)
_TLS_OTHER_HINT = f"check that endpoint_url names an HTTPS endpoint; {TLS_TRUST_HOW_TO}"


def _tls_cause(info: dict) -> tuple[str, str]:
    """The cause of a failed TLS handshake in words, and what to do."""
    reason = info.get("tls_reason", "")
    if reason in _TLS_CAUSES:
        return _TLS_CAUSES[reason]
    if reason in _NOT_TLS_REASONS:
        answer = info.get("tls_reason_message", "") if reason == "NOT_TLS" else ""
        if answer:
            # What the server sent instead, e.g. the status line of a plain-HTTP server's 400.
            return f"{_NOT_TLS[0]} (it answered {answer!r})", _NOT_TLS[1]
        return _NOT_TLS
    return "TLS handshake failed", _TLS_OTHER_HINT


# A proxy's answer to CONNECT -> (the cause in words, what to do).
_PROXY_REFUSALS = {
    407: (
        "the proxy asks for credentials",
        "put them in the proxy URL, http://user:password@host:port (proxy_url= or HTTPS_PROXY)",
    ),
    403: (
        "the proxy refused the connection",
        "ask the proxy's administrators to allow this endpoint, or bypass the proxy for its host with "
        'NO_PROXY (or proxy_url="")',
    ),
}
_PROXY_OTHER = (
    "the proxy could not open a tunnel to the endpoint",
    "check endpoint_url and that the proxy can reach it",
)


def _proxy_cause(info: dict) -> tuple[str, str]:
    """The cause of a refused CONNECT in words, and what to do."""
    return _PROXY_REFUSALS.get(info.get("proxy_status", 0), _PROXY_OTHER)


def _is_proxy_refusal(info: dict) -> bool:
    crt = info["crt_error_name"]
    return info["http_status"] == 0 and crt.startswith("AWS_ERROR_HTTP_PROXY_CONNECT_FAILED")


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
    if crt == "AWS_ERROR_S3_OBJECT_MODIFIED":
        # Parts after the first are asked for with If-Match: <first part's ETag>; 412 means a new version.
        return S3IntegrityError, (
            "the object was overwritten while it was read (its ETag changed); the bytes already returned "
            "are from the old version only: read the object again"
        )
    if info["operation"] in _WRITE_OPERATIONS and (
        status in (409, 412) or code in ("PreconditionFailed", "ConditionalRequestConflict")
    ):
        # Writers that may not overwrite send If-None-Match: *; S3 answers 412, or 409 when another writer's
        # upload of the same key completed first.
        return S3ObjectExistsError, (
            "the object already exists and the writer was opened with overwrite=False; delete it first or "
            "open the writer with overwrite=True"
        )
    if status == 412 or code == "PreconditionFailed":
        # A re-fetch of part of an object carries If-Match: <the ETag the stream started with>.
        return S3IntegrityError, (
            "the object was overwritten after this stream started reading it (its ETag changed); the bytes "
            "already returned are from the old version only: open the object again"
        )
    if kind in ("short_body", "out_of_order"):
        return S3IntegrityError, "the object was not received intact; it may have been overwritten while read"
    if code == "NoSuchUpload":
        # Only a write's multipart upload can be gone. One completed by an attempt whose answer was lost is
        # not raised (the writer finds the object made of its parts): what is left was ended by others.
        return S3FileNotFoundError, (
            "the multipart upload was aborted while it was written (a lifecycle rule on incomplete "
            "uploads, or another process); write the object again"
        )
    if code in _NOT_FOUND_CODES or status == 404:
        return S3FileNotFoundError, "check the bucket name and the key"
    if code in _PERMISSION_HINTS:
        return S3PermissionError, _PERMISSION_HINTS[code]
    if status == 0 and crt.startswith("AWS_AUTH_"):
        # The request was never sent: the CRT's provider chain found no credentials to sign it with.
        return S3PermissionError, no_credentials_hint(os.environ)
    if status == 403:
        return S3PermissionError, _PERMISSION_HINT
    if code in _REGION_CODES or status == 301:
        return S3Error, (
            "the bucket is in another region than the one requests are signed for; "
            "set region= (or AWS_REGION) to the bucket's region"
        )
    if status == 0 and crt.startswith("AWS_IO_TLS_ERROR"):
        return S3NetworkError, _tls_cause(info)[1]
    if _is_proxy_refusal(info):
        return S3NetworkError, _proxy_cause(info)[1]
    if status == 0 and crt.startswith(_NETWORK_PREFIXES):
        if crt == "AWS_ERROR_HTTP_RESPONSE_FIRST_BYTE_TIMEOUT":
            # Only the requests that make the store work on the whole object wait under this timeout.
            return (
                S3TimeoutError,
                "the endpoint did not begin its answer within completion_timeout_ms on any attempt (it works "
                "on the whole object first: CompleteMultipartUpload, UploadPartCopy, CopyObject); raise "
                "completion_timeout_ms or check the endpoint",
            )
        if "TIMEOUT" in crt:
            return (
                S3TimeoutError,
                "the endpoint did not answer in time; check the endpoint URL and the network",
            )
        if crt == "AWS_ERROR_HTTP_CHANNEL_THROUGHPUT_FAILURE":
            # The CRT dropped a connection that moved no byte for a while, on the last allowed attempt too.
            return (
                S3TimeoutError,
                "the endpoint stopped sending data on every attempt; check the endpoint and the network",
            )
        return S3NetworkError, "check the endpoint URL, the network and proxy settings"
    if code == "SlowDown" or crt == "AWS_ERROR_S3_SLOW_DOWN":
        return (
            S3Error,
            "S3 is throttling requests even after retries; spread keys across prefixes, lower the request "
            "rate (fewer workers), or allow more retries (max_throttle_retries)",
        )
    if crt == "AWS_ERROR_S3_INTERNAL_ERROR" or code == "InternalError" or 500 <= status < 600:
        return S3Error, "the endpoint kept failing with server errors through every retry; try again later"
    if status == 400 and not code:
        # S3 explains every 400 with an error document; a bare one is most often a TLS port spoken to in
        # plain HTTP.
        return S3Error, _PLAIN_HTTP_TO_TLS_HINT
    if crt in _MISSING_FROM_AN_S3_ANSWER:
        return S3Error, NOT_AN_S3_API_HINT
    return S3Error, ""


# A success answer without what S3 always sends: the endpoint is no S3 API, or a proxy or gateway between
# mangles its answers.
NOT_AN_S3_API_HINT = "check that endpoint_url points at an S3 API"
_MISSING_FROM_AN_S3_ANSWER = {
    "AWS_ERROR_S3_MISSING_CONTENT_RANGE_HEADER",
    "AWS_ERROR_S3_INVALID_CONTENT_RANGE_HEADER",
    "AWS_ERROR_S3_MISSING_CONTENT_LENGTH_HEADER",
    "AWS_ERROR_S3_INVALID_CONTENT_LENGTH_HEADER",
    "AWS_ERROR_S3_MISSING_ETAG",
    "AWS_ERROR_S3_MISSING_UPLOAD_ID",
}

_PLAIN_HTTP_TO_TLS_HINT = (
    "the endpoint refused the request without an S3 error document; if it serves HTTPS, use an https:// "
    "endpoint_url"
)


def printable_url(url: str) -> str:
    """`url` for a message: control characters (tabs, line breaks, ...) escaped so that they show."""
    if url.isprintable():
        return url
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in url)


def with_hint(message: str, hint: str) -> str:
    """`message` ending with `hint` as its last sentence (the catalogue's "what to do")."""
    message = message.rstrip(".")
    return f"{message}. {hint[0].upper()}{hint[1:]}." if hint else message


def error_from_native(info: dict) -> S3Error:
    """Builds the exception for one failed request from what the native core reports (a dict)."""
    cls, hint = _classify(info)
    url = f"s3://{info['bucket']}/{info['key']}"
    status = info["http_status"]
    # An error answer without an S3 error document (HEAD-like, or a proxy's) is named by its HTTP status.
    status_phrase = ""
    if status and info["crt_error_name"] in ("", "AWS_ERROR_S3_INVALID_RESPONSE_STATUS"):
        try:
            status_phrase = HTTPStatus(status).phrase
        except ValueError:
            status_phrase = ""
    what = info["s3_error_code"] or info["detail"] or status_phrase or info["crt_error_name"]
    if status == 0 and info["crt_error_name"].startswith("AWS_IO_TLS_ERROR"):
        cause = _tls_cause(info)[0]
        endpoint = info.get("tls_endpoint", "")
        reason = info.get("tls_reason", "")
        what = (
            f"TLS handshake{' with ' + endpoint if endpoint else ''} failed: {cause} "
            f"({reason + ', ' if reason else ''}{info['crt_error_name']})"
        )
    if _is_proxy_refusal(info):
        proxy = info.get("proxy", "")
        proxy_status = info.get("proxy_status", 0)
        answer = f" (HTTP {proxy_status})" if proxy_status else ""
        through = f"the proxy {proxy}" if proxy else "the proxy"
        what = f"CONNECT through {through} failed: {_proxy_cause(info)[0]}{answer} ({info['crt_error_name']})"
    parts = [f"{info['operation']} {printable_url(url)} failed: {what}"]
    if status:
        parts.append(f"(HTTP {status})")
    if info["s3_error_message"]:
        parts.append(f"- {info['s3_error_message']}")
    elif info["crt_error_message"] and info["kind"] == "crt" and what == info["crt_error_name"]:
        parts.append(f"- {info['crt_error_message']}")
    return cls(
        with_hint(" ".join(parts), hint),
        url=url,
        operation=info["operation"],
        http_status=status,
        s3_error_code=info["s3_error_code"],
        crt_error=info["crt_error_name"],
    )


def credentials_unavailable(url: str, operation: str, problem: str, hint: str = "") -> S3PermissionError:
    """The error for a request that could not be sent because its credentials cannot be set up at all."""
    return S3PermissionError(
        with_hint(f"{operation} {printable_url(url)} failed: {problem}", hint),
        url=url,
        operation=operation,
    )
