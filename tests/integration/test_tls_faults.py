"""The fault-proxy cases that mean something over TLS: a retried 503/500, a connection dropped or a body cut
inside a TLS session, and a stalled body, with data byte-exact or a typed error, as over plain HTTP.

tests/fault_proxy.py serves HTTPS (a certificate from a CA made for this module) in front of moto. A lean
subset of tests/integration/test_faults.py: one attempt per fault, on a later part (a reused TLS session,
the path real downloads take), and the persistent drop (a new handshake per retry, which the TLS-aware retry
strategy must keep retrying: a dropped connection is not a certificate problem). Writes join them: one PUT
and a multipart upload over TLS, clean and with a connection dropped or an upload body cut inside TLS.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterator

import pytest

from benchmarks.endpoint.certificates import SessionCertificates, make_session_certificates
from tests.fault_proxy import Fault, FaultProxy
from tests.integration.test_faults import (
    OBJECT_SIZE,
    PART,
    PARTS,
    RETRIED_FAULTS,
    later_part,
    load_one,
    path_of,
    payload,
    put,
)
from tests.s3_server import MotoServer
from torchdata_s3 import S3Config, S3Error, S3NetworkError

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> SessionCertificates:
    return make_session_certificates(tmp_path_factory.mktemp("tls-fault-certificates"))


@pytest.fixture
def tls_proxy(
    moto_server: MotoServer, s3_endpoint: str, certificates: SessionCertificates
) -> Iterator[FaultProxy]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    certificate, key = certificates.valid.nginx_files
    context.load_cert_chain(certificate, key)
    with FaultProxy(moto_server.port, seed=10, stall_s=60, tls=context) as running:
        yield running


def tls_config(proxy: FaultProxy, certificates: SessionCertificates, **overrides: object) -> S3Config:
    assert proxy.endpoint_url.startswith("https://")
    return S3Config.resolve(
        endpoint_url=proxy.endpoint_url, ca_file=str(certificates.ca_file), part_size_bytes=PART, **overrides
    )


@pytest.mark.parametrize("fault", [*RETRIED_FAULTS, Fault.STALL_BODY], ids=lambda fault: fault.value)
def test_one_fault_inside_tls_is_retried_and_the_data_is_exact(
    boto_s3, bucket: str, tls_proxy: FaultProxy, certificates: SessionCertificates, fault: Fault
) -> None:  # type: ignore[no-untyped-def]
    data = payload(OBJECT_SIZE, seed=21)
    url = put(boto_s3, bucket, "obj", data)
    tls_proxy.force(fault, 1, eligible=later_part)
    # A stalled connection is dropped after ~4-5 s of silence and retried (tests/integration/test_faults.py).
    config = tls_config(tls_proxy, certificates, request_timeout_ms=9000)

    assert load_one(url, config) == data

    assert tls_proxy.injected == {fault: 1}
    assert tls_proxy.attempts(path_of(url)) == PARTS + 1


def test_connections_dropped_inside_tls_are_retried_then_fail_typed(
    boto_s3, bucket: str, tls_proxy: FaultProxy, certificates: SessionCertificates
) -> None:  # type: ignore[no-untyped-def]
    url = put(boto_s3, bucket, "obj", payload(OBJECT_SIZE, seed=22))
    tls_proxy.force(Fault.DROP, 100)
    started = time.monotonic()

    with pytest.raises(S3Error) as caught:
        load_one(url, tls_config(tls_proxy, certificates, max_retries=2))

    assert type(caught.value) is S3NetworkError, repr(caught.value)
    assert caught.value.crt_error == "AWS_IO_SOCKET_CLOSED"
    assert url in str(caught.value)
    assert tls_proxy.attempts(path_of(url)) == 3  # every retry made: a drop is not a certificate problem
    assert time.monotonic() - started < 10


# ---- writes over TLS -------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [100_000, 11 * 1024 * 1024], ids=["single-put", "multipart"])
@pytest.mark.parametrize(
    "fault", [None, Fault.DROP, Fault.CUT_REQUEST], ids=lambda f: f.value if f else "none"
)
def test_writes_over_tls_land_byte_exact(
    boto_s3, bucket: str, tls_proxy: FaultProxy, certificates: SessionCertificates, size: int, fault: Fault
) -> None:  # type: ignore[no-untyped-def]
    from torchdata_s3 import S3Client

    data = payload(size, seed=23)
    if fault is not None:
        tls_proxy.force(
            fault, 1, eligible=lambda request: request.s3_operation in ("PutObject", "UploadPart")
        )
    config = tls_config(tls_proxy, certificates, multipart_threshold_bytes=1024 * 1024)
    with S3Client(config).open(f"s3://{bucket}/written", "wb") as writer:
        writer.write(data)
    assert boto_s3.get_object(Bucket=bucket, Key="written")["Body"].read() == data
    assert boto_s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    assert tls_proxy.injected == ({fault: 1} if fault else {})
