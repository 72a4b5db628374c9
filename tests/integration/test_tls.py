"""HTTPS: nginx serving TLS on loopback with certificates made for this session (valid, wrong host, expired).

Objects arrive byte-exact with every way of trusting the CA; every way a handshake can fail raises a typed
error naming the cause and the fix within a few seconds (no blinding delay for a failed handshake,
no retries that cannot help; test_tls_blinding.py shows where the delay stays).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from torch.utils.data.datapipes.iter import IterableWrapper

from benchmarks.endpoint.certificates import SessionCertificates, make_session_certificates
from benchmarks.endpoint.nginx import LocalEndpoint, ensure_nginx_installed
from benchmarks.endpoint.verify import check_profile
from tests.connect_proxy import ConnectProxy, connect_proxy
from tests.s3_server import free_loopback_port
from torchdata_s3 import (
    S3Client,
    S3Config,
    S3Error,
    S3FileLister,
    S3FileLoader,
    S3NetworkError,
    _core,
)

pytestmark = pytest.mark.integration

BUCKET = "tls"
SMALL_KEYS = [f"small/{number:03d}.bin" for number in range(40)]
MULTIPART_KEY = "multipart.bin"
MULTIPART_BYTES = 20 * 1024 * 1024 + 12345  # three 8 MiB parts, the last one short
LARGE_KEY = "large.bin"
LARGE_BYTES = 1024 * 1024 * 1024
# "A few seconds": a failed handshake is answered in milliseconds on loopback; the margin is for a busy CI.
FAST_FAILURE_S = 3.0


def small_body(key: str) -> bytes:
    return f"{key}\n".encode() * 97


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> SessionCertificates:
    return make_session_certificates(tmp_path_factory.mktemp("tls-certificates"))


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small objects and the multipart one; the large one joins them when a test asks (large_object)."""
    root = tmp_path_factory.mktemp("tls-data")
    bucket = root / BUCKET
    (bucket / "small").mkdir(parents=True)
    for key in SMALL_KEYS:
        (bucket / key).write_bytes(small_body(key))
    (bucket / MULTIPART_KEY).write_bytes(os.urandom(MULTIPART_BYTES))
    return root


@pytest.fixture(scope="module")
def large_object(data_root: Path) -> str:
    """The sha256 of the large object, written in 1 MiB blocks that all differ."""
    seed = os.urandom(1024 * 1024)
    digest = hashlib.sha256()
    with open(data_root / BUCKET / LARGE_KEY, "wb") as large:
        for block in range(LARGE_BYTES // len(seed)):
            data = block.to_bytes(8, "little") + seed[8:]
            digest.update(data)
            large.write(data)
    return digest.hexdigest()


def _endpoint(root: Path, files: tuple[Path, Path]) -> Iterator[LocalEndpoint]:
    ensure_nginx_installed()
    with LocalEndpoint(root, tls=files) as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def https_endpoint(data_root: Path, certificates: SessionCertificates) -> Iterator[LocalEndpoint]:
    yield from _endpoint(data_root, certificates.valid.nginx_files)


@pytest.fixture(scope="module")
def wrong_host_endpoint(data_root: Path, certificates: SessionCertificates) -> Iterator[LocalEndpoint]:
    yield from _endpoint(data_root, certificates.wrong_host.nginx_files)


@pytest.fixture(scope="module")
def expired_endpoint(data_root: Path, certificates: SessionCertificates) -> Iterator[LocalEndpoint]:
    yield from _endpoint(data_root, certificates.expired.nginx_files)


@pytest.fixture(scope="module")
def plain_endpoint(data_root: Path) -> Iterator[LocalEndpoint]:
    ensure_nginx_installed()
    with LocalEndpoint(data_root) as endpoint:
        yield endpoint


TRUST_MODES = ["ca_file", "AWS_CA_BUNDLE", "verify_ssl=False", "S3_VERIFY_SSL=0"]


def trusting_config(
    mode: str, endpoint: LocalEndpoint, certificates: SessionCertificates, monkeypatch: pytest.MonkeyPatch
) -> S3Config:
    if mode == "ca_file":
        return S3Config.resolve(endpoint_url=endpoint.endpoint_url, ca_file=str(certificates.ca_file))
    if mode == "AWS_CA_BUNDLE":
        monkeypatch.setenv("AWS_CA_BUNDLE", str(certificates.ca_file))
    elif mode == "S3_VERIFY_SSL=0":
        monkeypatch.setenv("S3_VERIFY_SSL", "0")
    config = S3Config.resolve(
        endpoint_url=endpoint.endpoint_url, verify_ssl=False if mode == "verify_ssl=False" else None
    )
    # The environment reached the configuration (and nothing else made it trust the CA).
    assert config.ca_file == (str(certificates.ca_file) if mode == "AWS_CA_BUNDLE" else None)
    assert config.verify_ssl is (mode == "ca_file" or mode == "AWS_CA_BUNDLE")
    return config


@pytest.mark.parametrize("mode", TRUST_MODES)
def test_listing_and_loading_small_and_multipart_objects_over_tls(
    mode: str,
    https_endpoint: LocalEndpoint,
    certificates: SessionCertificates,
    data_root: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = trusting_config(mode, https_endpoint, certificates, monkeypatch)
    listed = list(S3FileLister(IterableWrapper([f"s3://{BUCKET}/small/"]), config=config))
    assert listed == [f"s3://{BUCKET}/{key}" for key in SMALL_KEYS]
    loaded = {url: stream.read() for url, stream in S3FileLoader(IterableWrapper(listed), config=config)}
    assert loaded == {f"s3://{BUCKET}/{key}": small_body(key) for key in SMALL_KEYS}
    with S3Client(config).open(f"s3://{BUCKET}/{MULTIPART_KEY}") as stream:
        assert stream.read() == (data_root / BUCKET / MULTIPART_KEY).read_bytes()


def test_a_large_object_over_tls_arrives_byte_exact(
    https_endpoint: LocalEndpoint, certificates: SessionCertificates, large_object: str
) -> None:
    config = S3Config.resolve(endpoint_url=https_endpoint.endpoint_url, ca_file=str(certificates.ca_file))
    digest = hashlib.sha256()
    received = 0
    with S3Client(config).open(f"s3://{BUCKET}/{LARGE_KEY}") as stream:
        while True:
            chunk = stream.read_chunk()
            if not chunk:
                break
            digest.update(chunk)
            received += len(chunk)
    assert received == LARGE_BYTES
    assert digest.hexdigest() == large_object


def failure_of(config: S3Config, url: str = f"s3://{BUCKET}/{SMALL_KEYS[0]}") -> tuple[S3Error, float]:
    started = time.monotonic()
    with pytest.raises(S3Error) as caught:
        S3Client(config).open(url).read()
    return caught.value, time.monotonic() - started


def test_an_untrusted_certificate_fails_fast_naming_the_cause_and_the_fix(
    https_endpoint: LocalEndpoint,
) -> None:
    error, elapsed = failure_of(S3Config.resolve(endpoint_url=https_endpoint.endpoint_url))
    assert type(error) is S3NetworkError
    assert elapsed < FAST_FAILURE_S
    message = str(error)
    assert f"s3://{BUCKET}/{SMALL_KEYS[0]}" in message
    assert f"TLS handshake with 127.0.0.1:{https_endpoint.port} failed: certificate not trusted" in message
    assert "ca_file=" in message and "AWS_CA_BUNDLE" in message and "verify_ssl=False" in message
    assert error.crt_error == "AWS_IO_TLS_ERROR_NEGOTIATION_FAILURE"


def test_listing_with_an_untrusted_certificate_fails_fast_too(https_endpoint: LocalEndpoint) -> None:
    config = S3Config.resolve(endpoint_url=https_endpoint.endpoint_url)
    started = time.monotonic()
    with pytest.raises(S3NetworkError, match="certificate not trusted"):
        list(S3FileLister(IterableWrapper([f"s3://{BUCKET}/small/"]), config=config))
    assert time.monotonic() - started < FAST_FAILURE_S


def test_a_certificate_for_another_host_fails_fast(
    wrong_host_endpoint: LocalEndpoint, certificates: SessionCertificates
) -> None:
    config = S3Config.resolve(
        endpoint_url=wrong_host_endpoint.endpoint_url, ca_file=str(certificates.ca_file)
    )
    error, elapsed = failure_of(config)
    assert type(error) is S3NetworkError
    assert elapsed < FAST_FAILURE_S
    assert "certificate is for another host" in str(error)
    assert "endpoint_url" in str(error)


def test_an_expired_certificate_fails_fast(
    expired_endpoint: LocalEndpoint, certificates: SessionCertificates
) -> None:
    config = S3Config.resolve(endpoint_url=expired_endpoint.endpoint_url, ca_file=str(certificates.ca_file))
    error, elapsed = failure_of(config)
    assert type(error) is S3NetworkError
    assert elapsed < FAST_FAILURE_S
    assert "certificate expired" in str(error)


def test_verify_ssl_false_accepts_every_bad_certificate(
    wrong_host_endpoint: LocalEndpoint, expired_endpoint: LocalEndpoint
) -> None:
    for endpoint in (wrong_host_endpoint, expired_endpoint):
        config = S3Config.resolve(endpoint_url=endpoint.endpoint_url, verify_ssl=False)
        assert S3Client(config).open(f"s3://{BUCKET}/{SMALL_KEYS[1]}").read() == small_body(SMALL_KEYS[1])


def test_plain_http_to_a_tls_port_fails_fast_suggesting_https(https_endpoint: LocalEndpoint) -> None:
    config = S3Config.resolve(endpoint_url=https_endpoint.endpoint_url.replace("https://", "http://"))
    error, elapsed = failure_of(config)
    assert type(error) is S3Error
    assert error.http_status == 400
    assert elapsed < FAST_FAILURE_S
    assert "use an https:// endpoint_url" in str(error)


def test_https_to_a_plain_http_port_fails_fast_suggesting_http(plain_endpoint: LocalEndpoint) -> None:
    # nginx answers the ClientHello with a plain-HTTP 400 and closes; s2n alone would wait for the rest of a
    # "record" 20 KB long, and the closed socket would be retried until request_timeout_ms.
    config = S3Config.resolve(endpoint_url=plain_endpoint.endpoint_url.replace("http://", "https://"))
    assert config.request_timeout_ms > FAST_FAILURE_S * 1000  # the failure below is not the reader's timer
    error, elapsed = failure_of(config)
    assert type(error) is S3NetworkError
    assert elapsed < FAST_FAILURE_S
    message = str(error)
    assert f"s3://{BUCKET}/{SMALL_KEYS[0]}" in message
    assert f"TLS handshake with 127.0.0.1:{plain_endpoint.port} failed" in message
    assert "the endpoint does not speak TLS: is it http://?" in message
    assert "(it answered 'HTTP/1.1 400 Bad Request')" in message
    assert "use an http:// endpoint_url" in message


def test_a_missing_ca_bundle_is_refused_when_the_configuration_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_CA_BUNDLE", str(tmp_path / "missing.pem"))
    with pytest.raises(ValueError, match=r"AWS_CA_BUNDLE=.*is not a file"):
        S3Config.resolve(endpoint_url="https://127.0.0.1:1")
    with pytest.raises(ValueError, match=r"ca_file .* is not a file"):
        S3Config.resolve(endpoint_url="https://127.0.0.1:1", ca_file=str(tmp_path / "missing.pem"))


def run_script(script: str) -> subprocess.CompletedProcess:
    """`script` run by a fresh interpreter from the repository's root, its output captured."""
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).parents[2],
    )


def test_the_process_exits_promptly_after_a_tls_failure(https_endpoint: LocalEndpoint) -> None:
    script = textwrap.dedent(
        f"""
        from torchdata_s3 import S3Client, S3Config, S3NetworkError
        config = S3Config.resolve(endpoint_url={https_endpoint.endpoint_url!r})
        try:
            S3Client(config).open("s3://{BUCKET}/{SMALL_KEYS[0]}").read()
        except S3NetworkError as error:
            print("raised", type(error).__name__)
        """
    )
    started = time.monotonic()
    result = run_script(script)
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "raised S3NetworkError"
    assert elapsed < 15.0  # interpreter + torch import included


@pytest.mark.parametrize("exit_after_s", [0.0, 0.02, 0.1])
def test_the_process_exits_cleanly_with_reads_over_tls_in_flight(
    https_endpoint: LocalEndpoint, certificates: SessionCertificates, exit_after_s: float
) -> None:
    # The CRT's threads go on decrypting records while the interpreter exits and OpenSSL's exit handler
    # (OPENSSL_cleanup) frees the TLS library's state.
    script = textwrap.dedent(
        f"""
        import time
        from torchdata_s3 import S3Client, S3Config
        config = S3Config.resolve(
            endpoint_url={https_endpoint.endpoint_url!r}, ca_file={str(certificates.ca_file)!r}
        )
        streams = [S3Client(config).open("s3://{BUCKET}/{MULTIPART_KEY}") for _ in range(4)]
        for stream in streams:
            stream.read(1000)
        time.sleep({exit_after_s})
        print("exiting", flush=True)
        """
    )
    result = run_script(script)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "exiting"
    assert result.stderr == ""


@pytest.fixture
def proxy() -> Iterator[ConnectProxy]:
    with connect_proxy() as running:
        yield running


def test_https_goes_through_the_https_proxy_with_connect(
    proxy: ConnectProxy,
    https_endpoint: LocalEndpoint,
    certificates: SessionCertificates,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # must not be used for https
    config = S3Config.resolve(endpoint_url=https_endpoint.endpoint_url, ca_file=str(certificates.ca_file))
    with S3Client(config).open(f"s3://{BUCKET}/{MULTIPART_KEY}") as stream:
        assert stream.read() == (https_endpoint.data_root / BUCKET / MULTIPART_KEY).read_bytes()
    lines = proxy.request_lines()
    assert lines and all(line == f"CONNECT 127.0.0.1:{https_endpoint.port} HTTP/1.1" for line in lines), lines


def test_plain_http_goes_through_the_http_proxy(
    proxy: ConnectProxy, plain_endpoint: LocalEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("http_proxy", proxy.url)
    config = S3Config.resolve(endpoint_url=plain_endpoint.endpoint_url)
    assert S3Client(config).open(f"s3://{BUCKET}/{SMALL_KEYS[2]}").read() == small_body(SMALL_KEYS[2])
    lines = proxy.request_lines()
    assert lines and lines[0].startswith(f"GET http://127.0.0.1:{plain_endpoint.port}/{BUCKET}/small/"), lines


@pytest.mark.parametrize("no_proxy", ["127.0.0.1", "localhost,127.0.0.1", "*"])
def test_no_proxy_bypasses_the_proxy(
    no_proxy: str,
    proxy: ConnectProxy,
    https_endpoint: LocalEndpoint,
    certificates: SessionCertificates,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", no_proxy)
    config = S3Config.resolve(endpoint_url=https_endpoint.endpoint_url, ca_file=str(certificates.ca_file))
    assert config.proxy_url is None
    assert S3Client(config).open(f"s3://{BUCKET}/{SMALL_KEYS[3]}").read() == small_body(SMALL_KEYS[3])
    assert proxy.request_lines() == []


def test_an_untrusted_certificate_behind_a_proxy_fails_fast_naming_the_cause(
    proxy: ConnectProxy, https_endpoint: LocalEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    # aws-c-http's tunnel takes the handshake's outcome for itself; tls_handshake_hook.h sees it first.
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    config = S3Config.resolve(endpoint_url=https_endpoint.endpoint_url)
    error, elapsed = failure_of(config)
    assert type(error) is S3NetworkError
    assert elapsed < FAST_FAILURE_S
    assert f"TLS handshake with 127.0.0.1:{https_endpoint.port} failed: certificate not trusted" in str(error)
    assert "ca_file=" in str(error) and "AWS_CA_BUNDLE" in str(error)
    assert len(proxy.request_lines()) == 1  # one CONNECT: no retry of a certificate that is not trusted


def test_a_certificate_for_another_host_behind_a_proxy_fails_fast(
    proxy: ConnectProxy,
    wrong_host_endpoint: LocalEndpoint,
    certificates: SessionCertificates,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    config = S3Config.resolve(
        endpoint_url=wrong_host_endpoint.endpoint_url, ca_file=str(certificates.ca_file)
    )
    error, elapsed = failure_of(config)
    assert type(error) is S3NetworkError
    assert elapsed < FAST_FAILURE_S
    assert "certificate is for another host" in str(error)


def test_proxy_credentials_from_the_proxy_url_are_sent(
    https_endpoint: LocalEndpoint, certificates: SessionCertificates
) -> None:
    with connect_proxy(credentials=("user", "p@ss")) as proxy:
        config = S3Config.resolve(
            endpoint_url=https_endpoint.endpoint_url,
            ca_file=str(certificates.ca_file),
            proxy_url=f"http://user:p%40ss@127.0.0.1:{proxy.port}",
        )
        assert S3Client(config).open(f"s3://{BUCKET}/{SMALL_KEYS[4]}").read() == small_body(SMALL_KEYS[4])
        assert proxy.request_lines() == [f"CONNECT 127.0.0.1:{https_endpoint.port} HTTP/1.1"]


@pytest.mark.parametrize(
    ("proxy_says", "cause", "fix"),
    [
        ("407", "the proxy asks for credentials (HTTP 407)", "user:password@"),
        ("403", "the proxy refused the connection (HTTP 403)", "NO_PROXY"),
    ],
    ids=["407", "403"],
)
def test_a_proxy_that_says_no_fails_fast_naming_the_proxy(
    proxy_says: str,
    cause: str,
    fix: str,
    https_endpoint: LocalEndpoint,
    certificates: SessionCertificates,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with connect_proxy(credentials=("user", "secret"), refuse_all=proxy_says == "403") as proxy:
        user = "user:secret@" if proxy_says == "403" else ""
        monkeypatch.setenv("HTTPS_PROXY", f"http://{user}127.0.0.1:{proxy.port}")
        config = S3Config.resolve(endpoint_url=https_endpoint.endpoint_url, ca_file=str(certificates.ca_file))
        error, elapsed = failure_of(config)
        attempts = len(proxy.request_lines())
    assert type(error) is S3NetworkError
    assert elapsed < FAST_FAILURE_S
    message = str(error)
    assert f"s3://{BUCKET}/{SMALL_KEYS[0]}" in message
    assert f"proxy 127.0.0.1:{proxy.port}" in message and cause in message and fix in message
    assert "secret" not in message
    assert attempts == 1  # not retried: the proxy will say the same again


def test_an_unreachable_proxy_is_retried_then_fails_typed(
    https_endpoint: LocalEndpoint, certificates: SessionCertificates, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Like an unreachable endpoint (test_faults.py): a refused connection may be a proxy restarting, so it is
    # retried; the CRT reports it alike for a proxy and an endpoint, so the message cannot name the proxy.
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{free_loopback_port()}")  # nothing listens there
    config = S3Config.resolve(
        endpoint_url=https_endpoint.endpoint_url, ca_file=str(certificates.ca_file), max_retries=1
    )
    error, elapsed = failure_of(config)
    assert type(error) is S3NetworkError
    assert error.crt_error == "AWS_IO_SOCKET_CONNECTION_REFUSED"
    assert "proxy settings" in str(error)
    assert elapsed < FAST_FAILURE_S  # one retry: its backoff is at most 1 s


def test_the_s3like_profile_keeps_its_latency_and_pace_over_tls(
    data_root: Path, certificates: SessionCertificates
) -> None:
    # The harness's --https runs: without sendfile, nginx paced nothing until its output buffers grew.
    ensure_nginx_installed()
    with LocalEndpoint(data_root, "s3like", tls=certificates.valid.nginx_files) as endpoint:
        measured = check_profile(
            endpoint.endpoint_url, BUCKET, MULTIPART_KEY, "s3like", ca_file=str(certificates.ca_file)
        )
    assert 24 <= measured["ttfb_ms"] <= 80
    assert 54 <= measured["bandwidth_mbps"] <= 103.5


def test_bodies_over_tls_are_decrypted_into_messages_and_plain_ones_received_in_place(
    https_endpoint: LocalEndpoint,
    plain_endpoint: LocalEndpoint,
    certificates: SessionCertificates,
    data_root: Path,
) -> None:
    """Receiving in place (cmake/AwsCrtPatches.cmake) needs the HTTP handler right above the socket: over TLS
    the decrypted bytes are in the TLS handler's messages, and must still come back exact."""
    expected = (data_root / BUCKET / MULTIPART_KEY).read_bytes()
    url = f"s3://{BUCKET}/{MULTIPART_KEY}"

    before = _core.bytes_received_in_place()
    tls_config = S3Config.resolve(endpoint_url=https_endpoint.endpoint_url, ca_file=str(certificates.ca_file))
    assert S3Client(tls_config).open(url).read() == expected
    assert _core.bytes_received_in_place() == before

    assert S3Client(S3Config.resolve(endpoint_url=plain_endpoint.endpoint_url)).open(url).read() == expected
    assert _core.bytes_received_in_place() > before
