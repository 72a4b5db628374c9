"""A container credentials endpoint on loopback (what ECS and EKS Pod Identity serve, and what the CRT asks
when ``AWS_CONTAINER_CREDENTIALS_FULL_URI`` names it), issuing short-lived keys that rotate on every fetch;
and STS's AssumeRoleWithWebIdentity (EKS IRSA), issuing them the same way for a token file it rotates.

Each answered GET hands out a new key pair from `issue` (real keys of the test's server, e.g. from its STS)
declared to expire `lifetime_s` later, and remembers that expiration, so that a front in the data path
(`refuse_expired`, a FaultProxy gate) refuses requests signed with a key past it, as S3 answers
``ExpiredToken``. An outage makes it answer 500 for a while, as an agent that is restarting does.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Optional
from urllib.parse import parse_qs

from tests.fault_proxy import ErrorAnswer, ProxiedRequest

# (access key id, secret access key, session token)
KeyTriple = tuple[str, str, str]

EXPIRED_TOKEN = ErrorAnswer(400, "Bad Request", "ExpiredToken", "The provided token has expired.")


class ContainerCredentialsEndpoint:
    content_type = "application/json"

    def __init__(self, issue: Callable[[], KeyTriple], *, lifetime_s: int) -> None:
        self._issue = issue
        self.lifetime_s = lifetime_s
        self._lock = threading.Lock()
        self._expirations: dict[str, int] = {}  # access key id -> expiration, in Unix seconds
        self._outage_until = 0.0  # time.monotonic() until which every fetch is answered 500
        self._outage_on_next_refresh_s = 0.0
        self.issued: list[tuple[float, str]] = []  # (time.monotonic(), access key id) per key handed out
        self.failed: list[float] = []  # time.monotonic() of each fetch answered 500
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._reply(*endpoint._answer(b""))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                self._reply(*endpoint._answer(self.rfile.read(length)))

            def _reply(self, body: bytes, status: int) -> None:
                self.send_response(status)
                self.send_header("Content-Type", endpoint.content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/credentials"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def outage_on_next_refresh(self, seconds: float) -> None:
        """The first fetch after the first key was issued starts an outage of `seconds`: 500 to every
        fetch, as when the agent restarts just as the client refreshes."""
        with self._lock:
            self._outage_on_next_refresh_s = seconds

    def outage(self, seconds: float) -> None:
        """Every fetch is answered 500 for the next `seconds`."""
        with self._lock:
            self._outage_until = time.monotonic() + seconds

    def expiration_of(self, access_key_id: str) -> Optional[int]:
        with self._lock:
            return self._expirations.get(access_key_id)

    def refuse_expired(self, request: ProxiedRequest) -> Optional[ErrorAnswer]:
        """A FaultProxy gate: ExpiredToken for a request signed with a key of ours past its expiration."""
        expiration = self.expiration_of(signing_key_of(request))
        if expiration is not None and time.time() >= expiration:
            return EXPIRED_TOKEN
        return None

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _answer(self, request_body: bytes) -> tuple[bytes, int]:
        now = time.monotonic()
        with self._lock:
            if self._outage_on_next_refresh_s and self.issued:
                self._outage_until = now + self._outage_on_next_refresh_s
                self._outage_on_next_refresh_s = 0.0
            if now < self._outage_until:
                self.failed.append(now)
                return self._error("InternalError", "restarting"), 500
        refusal = self._refusal(request_body)
        if refusal is not None:
            return refusal
        access_key_id, secret, token = self._issue()
        expiration = int(time.time()) + self.lifetime_s
        with self._lock:
            self._expirations[access_key_id] = expiration
            self.issued.append((time.monotonic(), access_key_id))
        iso_expiration = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expiration))
        return self._document(access_key_id, secret, token, iso_expiration), 200

    def _refusal(self, request_body: bytes) -> Optional[tuple[bytes, int]]:
        return None  # the container endpoint answers every GET

    def _error(self, code: str, message: str) -> bytes:
        return json.dumps({"code": code, "message": message}).encode()

    def _document(self, access_key_id: str, secret: str, token: str, expiration: str) -> bytes:
        document = {
            "AccessKeyId": access_key_id,
            "SecretAccessKey": secret,
            "Token": token,
            "Expiration": expiration,
        }
        return json.dumps(document).encode()


class WebIdentitySts(ContainerCredentialsEndpoint):
    """STS's AssumeRoleWithWebIdentity on loopback (what the CRT asks when ``AWS_WEB_IDENTITY_TOKEN_FILE`` and
    ``AWS_ROLE_ARN`` are set and ``AWS_ENDPOINT_URL_STS`` names it), for `role_arn` only. The token in
    `token_file` is rotated by :meth:`rotate_token`, as Kubernetes rotates a projected service account token;
    the current token and the one before it are accepted, older ones refused (``InvalidIdentityToken``), so
    a client that read the file only once fails after two rotations."""

    content_type = "text/xml"

    def __init__(
        self, issue: Callable[[], KeyTriple], *, lifetime_s: int, token_file: str, role_arn: str
    ) -> None:
        self.token_file = token_file
        self.role_arn = role_arn
        self._tokens = [f"token-{time.time_ns()}"]
        self._write_token()
        self.refused_tokens: list[str] = []
        super().__init__(issue, lifetime_s=lifetime_s)
        self.url = self.url.rsplit("/", 1)[0]  # STS answers at the root

    def rotate_token(self) -> None:
        with self._lock:
            self._tokens.append(f"token-{time.time_ns()}")
            self._write_token()

    def _write_token(self) -> None:
        staged = self.token_file + ".new"
        with open(staged, "w") as out:
            out.write(self._tokens[-1])
        os.replace(staged, self.token_file)  # a reader sees the old token or the new one, never half of one

    def _refusal(self, request_body: bytes) -> Optional[tuple[bytes, int]]:
        form = {name: values[0] for name, values in parse_qs(request_body.decode()).items()}
        if form.get("Action") != "AssumeRoleWithWebIdentity" or form.get("RoleArn") != self.role_arn:
            return self._error("AccessDenied", f"not a web identity request for {self.role_arn}"), 403
        token = form.get("WebIdentityToken", "")
        with self._lock:
            if token in self._tokens[-2:]:
                return None
            self.refused_tokens.append(token)
        return self._error("InvalidIdentityToken", "the token is no longer valid"), 400

    def _error(self, code: str, message: str) -> bytes:
        return (
            f"<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error>"
            "</ErrorResponse>"
        ).encode()

    def _document(self, access_key_id: str, secret: str, token: str, expiration: str) -> bytes:
        return (
            '<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">'
            "<AssumeRoleWithWebIdentityResult><Credentials>"
            f"<AccessKeyId>{access_key_id}</AccessKeyId><SecretAccessKey>{secret}</SecretAccessKey>"
            f"<SessionToken>{token}</SessionToken><Expiration>{expiration}</Expiration>"
            "</Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>"
        ).encode()


def signing_key_of(request: ProxiedRequest) -> str:
    """The access key id of a SigV4-signed request ("" if unsigned)."""
    authorization = request.headers.get("authorization", "")
    _, _, credential = authorization.partition("Credential=")
    return credential.split("/", 1)[0]


@contextmanager
def container_credentials_endpoint(
    issue: Callable[[], KeyTriple], *, lifetime_s: int
) -> Iterator[ContainerCredentialsEndpoint]:
    endpoint = ContainerCredentialsEndpoint(issue, lifetime_s=lifetime_s)
    try:
        yield endpoint
    finally:
        endpoint.stop()
