"""docs/errors.md against the code: the classes, their bases and errno, and every hint a message can end with.
Also the message rules the catalogue states (status names, escaped URLs, errno through pickling)."""

from __future__ import annotations

import builtins
import errno
import importlib
import pickle
import re
from pathlib import Path

import pytest

import torchdata_s3
from tests.unit.test_errors import native_info
from torchdata_s3.errors import (
    CREDENTIALS_HOW_TO,
    _classify,
    credentials_unavailable,
    error_from_native,
    no_credentials_hint,
)

CATALOGUE = (Path(__file__).resolve().parents[2] / "docs" / "errors.md").read_text()


def table_rows(heading: str) -> list[list[str]]:
    """The cells of the data rows of the first table after `heading`."""
    section = CATALOGUE.split(f"\n{heading}\n", 1)[1]
    rows = []
    for line in section.splitlines():
        if rows and not line.startswith("|"):
            break
        if line.startswith("|") and not line.startswith("| ---"):
            rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows[1:]  # without the header


def named(cell: str) -> list[str]:
    return re.findall(r"`([A-Za-z_][A-Za-z0-9_.]*)`", cell)


def exported_exceptions() -> set[str]:
    return {
        name
        for name in torchdata_s3.__all__
        if isinstance(getattr(torchdata_s3, name), type)
        and issubclass(getattr(torchdata_s3, name), Exception)
    }


def test_the_classes_table_matches_the_code() -> None:
    rows = table_rows("## The classes")
    documented = {named(cls_cell)[0] for cls_cell, _, _ in rows}
    assert documented == exported_exceptions()
    for cls_cell, bases_cell, errno_cell in rows:
        cls = getattr(torchdata_s3, named(cls_cell)[0])
        for base in named(bases_cell):
            assert issubclass(cls, getattr(torchdata_s3, base, None) or getattr(builtins, base)), (cls, base)
        if "not an `OSError`" in errno_cell:
            assert not issubclass(cls, OSError)
            continue
        # DataLoader rebuilds worker errors from their message alone; errno must survive that and pickling.
        expected = None if errno_cell == "None" else getattr(errno, named(errno_cell)[0])
        assert cls("message").errno == expected
        assert pickle.loads(pickle.dumps(cls("message", url="s3://b/k"))).errno == expected


@pytest.mark.parametrize(
    "heading", ["### Input", "### Datasets and resume", "### Requests", "### Checkpoints"]
)
def test_every_class_in_the_catalogue_exists(heading: str) -> None:
    for row in table_rows(heading):
        raised = named(row[1])
        assert raised, row
        for name in raised:
            if name.startswith(("AWS_", "http_status", "crt_error")):
                continue
            if "." in name:  # another module's class, e.g. pickle.UnpicklingError
                module, _, attribute = name.rpartition(".")
                assert issubclass(getattr(importlib.import_module(module), attribute), Exception), name
                continue
            cls = getattr(torchdata_s3, name, None) or getattr(builtins, name)
            assert issubclass(cls, Exception), name
            assert name in torchdata_s3.__all__ or name in dir(builtins), name


# One failure per branch of the classification.
EVERY_KIND_OF_FAILURE = [
    {"kind": "timed_out", "detail": "no data within 10 ms"},
    {"kind": "short_body", "detail": "the body ended early"},
    {"http_status": 404, "s3_error_code": "NoSuchKey"},
    *(
        {"http_status": 403, "s3_error_code": code}
        for code in (
            "AccessDenied",
            "AllAccessDisabled",
            "AccountProblem",
            "InvalidAccessKeyId",
            "SignatureDoesNotMatch",
        )
    ),
    *(
        {"http_status": 400, "s3_error_code": code}
        for code in ("InvalidToken", "ExpiredToken", "TokenRefreshRequired")
    ),
    {"crt_error_name": "AWS_AUTH_SIGNING_NO_CREDENTIALS"},
    {"http_status": 403},
    {"http_status": 301, "s3_error_code": "PermanentRedirect"},
    {"http_status": 400, "s3_error_code": "AuthorizationHeaderMalformed"},
    {"crt_error_name": "AWS_IO_SOCKET_CONNECTION_REFUSED"},
    {"crt_error_name": "AWS_IO_SOCKET_TIMEOUT"},
    {"http_status": 503, "s3_error_code": "SlowDown"},
    {
        "http_status": 412,
        "crt_error_name": "AWS_ERROR_S3_OBJECT_MODIFIED",
        "s3_error_code": "PreconditionFailed",
    },
    {"http_status": 412, "s3_error_code": "PreconditionFailed", "operation": "PutObject"},
    {
        "http_status": 409,
        "s3_error_code": "ConditionalRequestConflict",
        "operation": "CompleteMultipartUpload",
    },
    {"crt_error_name": "AWS_ERROR_HTTP_CHANNEL_THROUGHPUT_FAILURE"},
    {"crt_error_name": "AWS_ERROR_S3_INTERNAL_ERROR"},
    {"http_status": 500, "s3_error_code": "InternalError"},
    {"http_status": 400},
    *(
        {"crt_error_name": "AWS_IO_TLS_ERROR_NEGOTIATION_FAILURE", "tls_reason": reason}
        for reason in (
            "S2N_ERR_CERT_UNTRUSTED",
            "S2N_ERR_CERT_INVALID_HOSTNAME",
            "S2N_ERR_CERT_EXPIRED",
            "S2N_ERR_CERT_NOT_YET_VALID",
            "S2N_ERR_BAD_MESSAGE",
            "S2N_ERR_SOMETHING_ELSE",
            "NOT_TLS",
        )
    ),
    {"crt_error_name": "AWS_ERROR_S3_MISSING_CONTENT_LENGTH_HEADER", "http_status": 206},
    {"crt_error_name": "AWS_ERROR_S3_MISSING_UPLOAD_ID", "http_status": 200},
    *(
        {
            "crt_error_name": "AWS_ERROR_HTTP_PROXY_CONNECT_FAILED",
            "proxy": "127.0.0.1:3128",
            "proxy_status": s,
        }
        for s in (407, 403, 502)
    ),
]


@pytest.mark.parametrize(
    "fields", EVERY_KIND_OF_FAILURE, ids=lambda fields: "-".join(map(str, fields.values()))
)
def test_every_hint_is_in_the_catalogue_with_its_class(fields: dict) -> None:
    info = native_info(**fields)
    cls, hint = _classify(info)
    sentence = f"{hint[0].upper()}{hint[1:]}."
    rows = [row for row in table_rows("### Requests") if sentence == row[3]]
    assert rows, f"docs/errors.md has no row ending with {sentence!r}"
    assert any(named(row[1])[0] == cls.__name__ for row in rows), (cls, rows)
    assert str(error_from_native(info)).endswith(f". {sentence}")


@pytest.mark.parametrize(
    ("environ", "placeholders"),
    [
        ({"AWS_EC2_METADATA_DISABLED": "true"}, {}),
        ({}, {}),
        (
            {"AWS_CONTAINER_CREDENTIALS_FULL_URI": "<url>"},
            {"AWS_CONTAINER_CREDENTIALS_FULL_URI": "<variable>"},
        ),
        (
            {"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/v2/credentials/id"},
            {
                "http://169.254.170.2/v2/credentials/id": "<url>",
                "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "<variable>",
            },
        ),
        ({"AWS_WEB_IDENTITY_TOKEN_FILE": "<file>", "AWS_ROLE_ARN": "<role>"}, {}),
        (
            {
                "AWS_WEB_IDENTITY_TOKEN_FILE": "<file>",
                "AWS_ROLE_ARN": "<role>",
                "AWS_ENDPOINT_URL_STS": "<url>",
            },
            {},
        ),
        (
            {"AWS_WEB_IDENTITY_TOKEN_FILE": "<file>", "AWS_ROLE_ARN": "<role>", "AWS_ENDPOINT_URL": "<url>"},
            {},
        ),
    ],
    ids=[
        "nothing",
        "instance-metadata",
        "container-full-uri",
        "container-relative-uri",
        "web-identity",
        "web-identity-sts-url",
        "web-identity-endpoint-url",
    ],
)
def test_every_no_credentials_hint_is_in_the_catalogue(environ: dict, placeholders: dict) -> None:
    hint = no_credentials_hint({"AWS_EC2_METADATA_DISABLED": "false", **environ})
    for value, placeholder in placeholders.items():
        hint = hint.replace(value, placeholder)
    sentence = f"{hint[0].upper()}{hint[1:]}."
    rows = [row for row in table_rows("### Requests") if sentence == row[3]]
    assert rows, f"docs/errors.md has no row ending with {sentence!r}"
    assert named(rows[0][1])[0] == "S3PermissionError"


def test_credential_remedies_are_in_the_catalogue() -> None:
    assert f"{CREDENTIALS_HOW_TO[0].upper()}{CREDENTIALS_HOW_TO[1:]}." in CATALOGUE
    assert f"No credentials were found: {CREDENTIALS_HOW_TO}." in CATALOGUE


def test_an_error_answer_without_a_code_is_named_by_its_status() -> None:
    error = error_from_native(native_info(http_status=403))
    assert str(error).startswith("GetObject s3://bkt/dir/file.bin failed: Forbidden (HTTP 403). Check the")
    assert "Invalid response status" not in str(error)
    assert (error.http_status, error.s3_error_code, error.crt_error) == (
        403,
        "",
        "AWS_ERROR_S3_INVALID_RESPONSE_STATUS",
    )


def test_the_crt_description_follows_a_crt_error_name() -> None:
    info = native_info(crt_error_name="AWS_IO_SOCKET_CONNECTION_REFUSED", crt_error_message="socket refused")
    assert str(error_from_native(info)).startswith(
        "GetObject s3://bkt/dir/file.bin failed: AWS_IO_SOCKET_CONNECTION_REFUSED - socket refused. Check"
    )


def test_control_characters_in_urls_are_shown_escaped() -> None:
    error = error_from_native(native_info(http_status=404, s3_error_code="NoSuchKey", key="tab\there\x7f"))
    assert "s3://bkt/tab\\there\\x7f failed: NoSuchKey" in str(error)
    assert error.url == "s3://bkt/tab\there\x7f"
    unicode = error_from_native(native_info(http_status=404, s3_error_code="NoSuchKey", key="日本 語"))
    assert "s3://bkt/日本 語 failed" in str(unicode)


def test_credentials_unavailable() -> None:
    error = credentials_unavailable("s3://b/k", "ListObjectsV2", "something is missing", "do this")
    assert type(error) is torchdata_s3.S3PermissionError
    assert str(error) == "ListObjectsV2 s3://b/k failed: something is missing. Do this."
    assert (error.url, error.operation, error.http_status, error.errno) == (
        "s3://b/k",
        "ListObjectsV2",
        0,
        13,
    )


@pytest.mark.parametrize(
    ("reason", "cause"),
    [
        ("S2N_ERR_CERT_UNTRUSTED", "certificate not trusted"),
        ("S2N_ERR_CERT_INVALID_HOSTNAME", "certificate is for another host"),
        ("S2N_ERR_CERT_EXPIRED", "certificate expired"),
        ("S2N_ERR_BAD_MESSAGE", "the endpoint does not speak TLS: is it http://?"),
        (
            "NOT_TLS",
            "the endpoint does not speak TLS: is it http://? (it answered 'HTTP/1.1 400 Bad Request')",
        ),
        ("", "TLS handshake failed"),
    ],
)
def test_a_tls_failure_names_the_endpoint_and_the_cause_in_words(reason: str, cause: str) -> None:
    info = native_info(
        crt_error_name="AWS_IO_TLS_ERROR_NEGOTIATION_FAILURE",
        tls_endpoint="127.0.0.1:8443",
        tls_reason=reason,
        tls_reason_message="HTTP/1.1 400 Bad Request" if reason == "NOT_TLS" else "",
    )
    error = error_from_native(info)
    assert type(error) is torchdata_s3.S3NetworkError
    assert str(error).startswith(
        f"GetObject s3://bkt/dir/file.bin failed: TLS handshake with 127.0.0.1:8443 failed: {cause} ("
    )
    assert "AWS_IO_TLS_ERROR_NEGOTIATION_FAILURE)" in str(error)
    assert any(fix in str(error) for fix in ("ca_file=", "verify_ssl=False", "http:// endpoint_url"))
