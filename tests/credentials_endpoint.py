"""A container credentials endpoint on loopback (what ECS and EKS Pod Identity serve, and what the CRT asks
when ``AWS_CONTAINER_CREDENTIALS_FULL_URI`` names it), issuing short-lived keys that rotate on every fetch.

Each answered GET hands out a new key pair from `issue` (real keys of the test's server, e.g. from its STS)
declared to expire `lifetime_s` later, and remembers that expiration, so that a front in the data path
(`refuse_expired`, a FaultProxy gate) refuses requests signed with a key past it, as S3 answers
``ExpiredToken``. An outage makes it answer 500 for a while, as an agent that is restarting does.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Optional

from tests.fault_proxy import ErrorAnswer, ProxiedRequest

# (access key id, secret access key, session token)
KeyTriple = tuple[str, str, str]

EXPIRED_TOKEN = ErrorAnswer(400, "Bad Request", "ExpiredToken", "The provided token has expired.")


class ContainerCredentialsEndpoint:
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
                body, status = endpoint._answer()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
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

    def _answer(self) -> tuple[bytes, int]:
        now = time.monotonic()
        with self._lock:
            if self._outage_on_next_refresh_s and self.issued:
                self._outage_until = now + self._outage_on_next_refresh_s
                self._outage_on_next_refresh_s = 0.0
            if now < self._outage_until:
                self.failed.append(now)
                return b'{"code": "InternalError", "message": "restarting"}', 500
        access_key_id, secret, token = self._issue()
        expiration = int(time.time()) + self.lifetime_s
        with self._lock:
            self._expirations[access_key_id] = expiration
            self.issued.append((time.monotonic(), access_key_id))
        document = {
            "AccessKeyId": access_key_id,
            "SecretAccessKey": secret,
            "Token": token,
            "Expiration": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expiration)),
        }
        return json.dumps(document).encode(), 200


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
