"""s2n's blinding delay where it protects something, and not where it only slows failures down.

After a completed handshake, a record that does not authenticate is what a timing attack on record decryption
sends: the connection it arrived on must close only after s2n's blinding delay (10-30 s), while the request
itself is retried at once on another connection and its data stays exact. A failed handshake (a certificate
the client rejects) closes at once: tests/integration/test_tls.py checks that it fails within seconds. Why
each side is so: csrc/tls_failures.h and cmake/AwsCrtPatches.cmake.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest

from benchmarks.endpoint.certificates import SessionCertificates
from tests.fault_proxy import FaultProxy
from tests.integration.test_faults import load_one, payload, put
from tests.integration.test_tls_faults import certificates, tls_proxy  # noqa: F401 (fixtures)
from tests.tampering_relay import TamperingRelay
from torchdata_s3 import S3Config

pytestmark = pytest.mark.integration

OBJECT_SIZE = 4 * 1024 * 1024
TAMPER_AT = 1024 * 1024  # well inside the body: the handshake is a few kB
S2N_BLINDING_FLOOR_S = 10.0  # s2n's default delay is uniform in [10 s, 30 s]
CLOSE_WAIT_S = 45.0


@pytest.fixture
def tampered_object(
    boto_s3,
    bucket: str,
    tls_proxy: FaultProxy,  # noqa: F811 (the fixture imported above)
) -> Iterator[tuple[str, bytes, TamperingRelay]]:  # type: ignore[no-untyped-def]
    """An object's URL and bytes, and a relay in front of the TLS proxy that tampers with the first GET."""
    data = payload(OBJECT_SIZE, seed=31)
    url = put(boto_s3, bucket, "blinded", data)
    with TamperingRelay(tls_proxy.port, tamper_at=TAMPER_AT) as relay:
        yield url, data, relay


def test_a_tampered_record_is_retried_at_once_and_its_connection_closes_after_the_blinding_delay(
    tampered_object: tuple[str, bytes, TamperingRelay],
    certificates: SessionCertificates,  # noqa: F811
) -> None:
    url, data, relay = tampered_object
    config = S3Config.resolve(endpoint_url=relay.endpoint_url, ca_file=str(certificates.ca_file))

    assert load_one(url, config) == data
    read_done = time.monotonic()

    assert relay.tampered_at is not None, "the relay never passed the byte it was to flip"
    assert relay.connections >= 2  # the tampered request went again, on a new connection
    close_s = relay.wait_for_the_tampered_close(CLOSE_WAIT_S)
    assert close_s is not None, f"the tampered connection was still open after {CLOSE_WAIT_S} s"
    # Measured from the tampered byte, so a slow machine can only lengthen it.
    assert close_s >= S2N_BLINDING_FLOOR_S - 0.1, f"closed {close_s:.2f} s after the tampered record"
    # The reader did not wait for it.
    assert relay.client_closed_at is not None and read_done < relay.client_closed_at


def test_the_process_exits_promptly_with_a_blinded_connection_still_open(
    tampered_object: tuple[str, bytes, TamperingRelay],
    certificates: SessionCertificates,  # noqa: F811
) -> None:
    url, data, relay = tampered_object
    program = textwrap.dedent(
        f"""
        import hashlib, time
        from torchdata_s3 import S3Client, S3Config
        config = S3Config.resolve(
            endpoint_url={relay.endpoint_url!r}, ca_file={str(certificates.ca_file)!r}
        )
        with S3Client(config).open({url!r}, "rb") as reader:
            print(hashlib.sha256(reader.read()).hexdigest(), flush=True)
        print(time.monotonic(), flush=True)
        """
    )
    finished = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False
    )
    exited = time.monotonic()

    assert finished.returncode == 0, finished.stderr
    digest, read_done = finished.stdout.split()
    assert digest == hashlib.sha256(data).hexdigest()
    assert relay.tampered_at is not None
    # The exit did not wait out the tampered connection's delayed close: the exit closed it.
    assert exited - float(read_done) < S2N_BLINDING_FLOOR_S / 2, finished.stderr
    close_s = relay.wait_for_the_tampered_close(CLOSE_WAIT_S)
    assert close_s is not None and close_s < S2N_BLINDING_FLOOR_S
