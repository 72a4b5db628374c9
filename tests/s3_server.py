"""Starting and stopping a real S3-protocol server (moto's) for the tests, out of process, on loopback."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from typing import Optional

# A request line of werkzeug's log answered with a 5xx status: "PUT /b/k?partNumber=3 HTTP/1.1" 500 -
_SERVER_ERROR = re.compile(r'HTTP/1\.[01]" 5\d\d ')


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class MotoServer:
    """``python -m moto.server`` on 127.0.0.1:<free port>; stopped by pid."""

    def __init__(self, extra_env: Optional[dict[str, str]] = None) -> None:
        self.port = free_loopback_port()
        self.endpoint_url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ)
        env.update(extra_env or {})
        # The server logs every request; a file (not a pipe nobody drains) keeps it from ever blocking.
        self.log = tempfile.TemporaryFile()  # noqa: SIM115  (closed in stop())
        self.process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        self._wait_until_ready(timeout_s=60)

    def _wait_until_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"moto server exited early: {self.log_tail()}")
            try:
                urllib.request.urlopen(f"{self.endpoint_url}/moto-api/", timeout=1).close()
                return
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"moto server did not answer on {self.endpoint_url} within {timeout_s} s")

    def _log_text(self) -> str:
        """Everything the server has logged so far (it writes the file; this reads it from the start)."""
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def log_tail(self, limit: int = 2000) -> str:
        return self._log_text()[-limit:]

    def server_errors(self, context_lines: int = 60) -> str:
        """The server's log from its first traceback or 5xx answer on (for a failed test's report), or ""."""
        lines = self._log_text().splitlines()
        marks = [
            n for n, line in enumerate(lines) if line.startswith("Traceback") or _SERVER_ERROR.search(line)
        ]
        if not marks:
            return ""
        shown = lines[max(0, marks[0] - 3) : marks[0] + context_lines]
        return f"{len(marks)} error lines; from the first:\n" + "\n".join(shown)

    def logged_requests(self) -> list[str]:
        """Every request the server has answered so far, as ``"METHOD /path?query HTTP/1.1"``, in order."""
        lines = self._log_text().splitlines()
        return [line.split('"')[1] for line in lines if line.count('"') >= 2 and '] "' in line]

    def reset(self) -> None:
        request = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST")
        urllib.request.urlopen(request, timeout=10).close()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.log.close()
