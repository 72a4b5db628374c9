"""A certificate authority and server certificates made for one run (with ``cryptography``): the TLS tests'
session and the harness's ``--https`` runs.

Three server certificates, all for loopback and all issued by the session's CA: ``valid`` (127.0.0.1 and
localhost, valid now), ``wrong_host`` (valid now, but only for a name that is not this host) and
``expired`` (for 127.0.0.1, but its validity ended yesterday). Nothing is ever trusted system-wide: a client
trusts the CA only when told its file.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

WRONG_HOST_NAME = "not-this-host.invalid"


@dataclasses.dataclass(frozen=True)
class ServerCertificate:
    chain: Path  # PEM: the server certificate, then the CA's
    key: Path  # PEM private key

    @property
    def nginx_files(self) -> tuple[Path, Path]:
        return self.chain, self.key


@dataclasses.dataclass(frozen=True)
class SessionCertificates:
    ca_file: Path  # PEM of the CA certificate: what a client must trust
    valid: ServerCertificate
    wrong_host: ServerCertificate
    expired: ServerCertificate


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )


def make_session_certificates(directory: Path) -> SessionCertificates:
    """Writes the CA and the three server certificates into `directory`."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("torchdata-s3 test CA")
    ca_certificate = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=2))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_pem = ca_certificate.public_bytes(serialization.Encoding.PEM)
    ca_file = directory / "ca.pem"
    ca_file.write_bytes(ca_pem)

    def issue(
        label: str, names: list[x509.GeneralName], not_before: datetime.datetime, not_after: datetime.datetime
    ) -> ServerCertificate:
        key = ec.generate_private_key(ec.SECP256R1())
        certificate = (
            x509.CertificateBuilder()
            .subject_name(_name(f"torchdata-s3 test server ({label})"))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_after)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
            )
            .sign(ca_key, hashes.SHA256())
        )
        chain = directory / f"{label}.chain.pem"
        chain.write_bytes(certificate.public_bytes(serialization.Encoding.PEM) + ca_pem)
        key_path = directory / f"{label}.key.pem"
        _write_key(key, key_path)
        return ServerCertificate(chain, key_path)

    loopback = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
    day = datetime.timedelta(days=1)
    return SessionCertificates(
        ca_file=ca_file,
        valid=issue("valid", loopback, now - day, now + day),
        wrong_host=issue("wrong-host", [x509.DNSName(WRONG_HOST_NAME)], now - day, now + day),
        expired=issue("expired", loopback, now - 3 * day, now - day),
    )
