"""``LocalEndpoint``: an S3-protocol endpoint on loopback, nginx for objects plus the listing sidecar.

    with LocalEndpoint(Path("/data"), profile="s3like") as endpoint:
        boto3.client("s3", endpoint_url=endpoint.endpoint_url, ...)

``/data/<bucket>/<key>`` is object ``<key>`` of bucket ``<bucket>``. Both processes are our children, on
free 127.0.0.1 ports, and are stopped by pid. See :mod:`benchmarks.endpoint.nginx_config` for the routing
and the profiles.

``writes=True`` adds S3's write operations (:mod:`benchmarks.endpoint.write_requests`): objects written land
in ``data_root`` atomically, and request bodies pass through ``<data_root>/.uploads``. With ``s3like``, a
third process, :mod:`benchmarks.endpoint.pacing_relay`, stands in front of nginx to pace request bodies.
"""

from __future__ import annotations

import contextlib
import grp
import http.client
import os
import pwd
import selectors
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Optional

from benchmarks.endpoint.bucket_indexes import UPLOADS_DIRECTORY
from benchmarks.endpoint.install import ECHO_MODULE, NGINX_BINARY, ensure_nginx_installed, missing_nginx_files
from benchmarks.endpoint.nginx_config import BYTES_PER_MB, PROFILES, NginxSettings, render_nginx_config

__all__ = ["PROFILES", "LocalEndpoint", "ensure_nginx_installed"]

_REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
# A bucket name no dataset uses: HEAD on it travels nginx -> sidecar and back without touching data.
_READINESS_PROBE_PATH = "/.endpoint-readiness-probe"
# Another process may take a port between our choosing it and nginx binding it; then we choose again.
_PORT_ATTEMPTS = 3
_STOP_TIMEOUT_S = 10.0


class LocalEndpoint:
    """An S3 endpoint serving ``data_root`` on ``http://127.0.0.1:<free port>``; a context manager.

    ``profile``: ``"fast"`` (default, no shaping) or ``"s3like"``: ``latency_ms`` (default 30) before the
    first byte of every response and at most ``bandwidth_mbps`` (default 90, in MB/s = 10^6 bytes/s) per
    connection. ``startup_timeout_s`` (default 20) bounds how long :meth:`start` waits for both servers.
    ``tls``: ``(certificate chain PEM, private key PEM)`` to serve https.

    ``writes`` (default False): also accept PutObject, multipart uploads, DeleteObject(s) and CreateBucket,
    path style, auth ignored. With ``s3like``, writes are answered ``latency_ms`` after their body has
    arrived, and what each connection sends is paced to ``bandwidth_mbps`` by a relay in front of nginx
    (responses stay paced by nginx). ``writes=False`` runs exactly the read-only endpoint.
    """

    def __init__(
        self,
        data_root: Path,
        profile: str = "fast",
        latency_ms: float = 30.0,
        bandwidth_mbps: float = 90.0,
        startup_timeout_s: float = 20.0,
        tls: Optional[tuple[Path, Path]] = None,
        writes: bool = False,
    ) -> None:
        if profile not in PROFILES:
            raise ValueError(f"unknown profile {profile!r}; expected one of {PROFILES}")
        self.data_root = Path(data_root).resolve()
        self.profile = profile
        self.latency_ms = latency_ms
        self.bandwidth_mbps = bandwidth_mbps
        self.startup_timeout_s = startup_timeout_s
        self.tls = tls
        self.writes = writes
        self.port: Optional[int] = None
        self._run_dir: Optional[Path] = None
        self._nginx: Optional[subprocess.Popen[bytes]] = None
        self._sidecar: Optional[subprocess.Popen[bytes]] = None
        self._sidecar_port: Optional[int] = None
        self._relay: Optional[subprocess.Popen[bytes]] = None
        self._incoming_dir: Optional[Path] = None

    @property
    def endpoint_url(self) -> str:
        """``http://127.0.0.1:<port>`` of nginx (``https://`` when serving TLS); only while started."""
        if self.port is None:
            raise RuntimeError("the endpoint is not started")
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def start(self) -> LocalEndpoint:
        """Start the sidecar, then nginx; return once both answer. Raises RuntimeError with nginx's error
        log tail if they do not within ``startup_timeout_s``."""
        if self._nginx is not None:
            raise RuntimeError("the endpoint is already started")
        if not self.data_root.is_dir():
            raise FileNotFoundError(f"data root {self.data_root} is not a directory")
        if missing_nginx_files():
            raise RuntimeError(
                f"nginx is not installed ({NGINX_BINARY}, {ECHO_MODULE}); call ensure_nginx_installed()"
            )
        self._run_dir = Path(tempfile.mkdtemp(prefix="s3-endpoint-"))
        deadline = time.monotonic() + self.startup_timeout_s
        try:
            if self.writes:
                # On the data root's file system, so a received body becomes an object by a rename; one
                # directory per endpoint, so endpoints sharing a data root do not delete each other's.
                uploads = self.data_root / UPLOADS_DIRECTORY
                uploads.mkdir(exist_ok=True)
                self._incoming_dir = Path(tempfile.mkdtemp(prefix=".incoming-", dir=uploads))
            self._start_sidecar(deadline)
            for attempt in range(1, _PORT_ATTEMPTS + 1):
                self._start_nginx(_free_loopback_port())
                if self.writes and self.profile == "s3like":
                    self._start_relay(deadline)
                if self._wait_until_answering(deadline):
                    return self
                port_was_taken = "Address already in use" in self.error_log_tail()
                if not (port_was_taken and attempt < _PORT_ATTEMPTS):
                    assert self._nginx is not None
                    exit_status = self._nginx.poll()
                    outcome = (
                        f"exited with status {exit_status}"
                        if exit_status is not None
                        else f"did not serve on {self.endpoint_url} within {self.startup_timeout_s} s"
                    )
                    raise RuntimeError(f"nginx ({self.profile}) {outcome}; logs:\n{self.error_log_tail()}")
                self._stop_nginx()
        except BaseException:
            self.stop()
            raise
        raise AssertionError("unreachable")

    def stop(self) -> None:
        """Stop nginx and the sidecar (by pid, waiting for them) and delete the run directory. Idempotent."""
        self._stop_nginx()
        if self._sidecar is not None:
            _terminate(self._sidecar)
            if self._sidecar.stdout is not None:
                self._sidecar.stdout.close()
            self._sidecar = None
        if self._incoming_dir is not None:
            # Bodies of requests cut off midway; pending multipart uploads stay, as on S3, until aborted.
            shutil.rmtree(self._incoming_dir, ignore_errors=True)
            with contextlib.suppress(OSError):  # only if empty: another endpoint may be using it
                self._incoming_dir.parent.rmdir()
            self._incoming_dir = None
        if self._run_dir is not None:
            shutil.rmtree(self._run_dir, ignore_errors=True)
            self._run_dir = None

    def process_ids(self) -> list[int]:
        """The endpoint's running processes: nginx's master and workers, the sidecar, the relay (if any)."""
        ours = [process.pid for process in (self._nginx, self._sidecar, self._relay) if process is not None]
        if self._nginx is not None:
            ours += _children_of(self._nginx.pid)
        return ours

    @property
    def access_log(self) -> Path:
        """nginx's access log (``<status> <body bytes>`` per request); only while started."""
        if self._run_dir is None:
            raise RuntimeError("the endpoint is not started")
        return self._run_dir / "access.log"

    def error_log_tail(self, limit: int = 4000) -> str:
        """The last ``limit`` characters of nginx's error log (and the sidecar's stderr)."""
        if self._run_dir is None:
            return ""
        tails = []
        for name in ("error.log", "sidecar.stderr", "relay.stderr"):
            path = self._run_dir / name
            if path.exists():
                tails.append(f"--- {name}\n{path.read_text(errors='replace')[-limit:]}")
        return "\n".join(tails)

    def __enter__(self) -> LocalEndpoint:
        return self.start()

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        self.stop()

    def _start_sidecar(self, deadline: float) -> None:
        assert self._run_dir is not None
        writes = ["--incoming", str(self._incoming_dir)] if self._incoming_dir else []
        command = ["-m", "benchmarks.endpoint.listing_server", "--root", str(self.data_root), "--port", "0"]
        self._sidecar = _start_announcing(
            [sys.executable, *command, *writes], self._run_dir / "sidecar.stderr"
        )
        self._sidecar_port = self._announced_port(self._sidecar, "the listing sidecar", deadline)

    def _start_relay(self, deadline: float) -> None:
        """The pacing relay in front of nginx (already listening on ``self.port``); it becomes the port."""
        assert self._run_dir is not None and self.port is not None
        rate = round(self.bandwidth_mbps * BYTES_PER_MB)
        command = [
            "-m",
            "benchmarks.endpoint.pacing_relay",
            "--target-port",
            str(self.port),
            "--rate",
            str(rate),
        ]
        self._relay = _start_announcing([sys.executable, *command], self._run_dir / "relay.stderr")
        self.port = self._announced_port(self._relay, "the pacing relay", deadline)

    def _announced_port(self, process: subprocess.Popen[bytes], name: str, deadline: float) -> int:
        assert process.stdout is not None
        announcement = _read_line_before(process.stdout, deadline)
        if not announcement.startswith("listening on "):
            raise RuntimeError(f"{name} did not start:\n{self.error_log_tail()}")
        return int(announcement.rsplit(":", 1)[1])

    def _start_nginx(self, port: int) -> None:
        assert self._run_dir is not None and self._sidecar_port is not None
        self.port = port
        settings = NginxSettings(
            data_root=self.data_root,
            run_dir=self._run_dir,
            port=port,
            listing_port=self._sidecar_port,
            profile=self.profile,
            latency_ms=self.latency_ms,
            bandwidth_mbps=self.bandwidth_mbps,
            echo_module=ECHO_MODULE,
            worker_user=_current_user_if_root(),
            tls=self.tls,
            incoming_dir=self._incoming_dir,
        )
        config_path = self._run_dir / "nginx.conf"
        config_path.write_text(render_nginx_config(settings))
        error_log = self._run_dir / "error.log"
        with open(error_log, "ab") as output:
            self._nginx = subprocess.Popen(
                [str(NGINX_BINARY), "-p", str(self._run_dir), "-c", str(config_path), "-e", str(error_log)],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=output,
                # Its own process group: if the master ever has to be killed, its workers go with it.
                start_new_session=True,
            )

    def _stop_nginx(self) -> None:
        if self._relay is not None:
            _terminate(self._relay)
            if self._relay.stdout is not None:
                self._relay.stdout.close()
            self._relay = None
        if self._nginx is not None:
            _terminate(self._nginx, whole_group=True)
            self._nginx = None
        self.port = None

    def _wait_until_answering(self, deadline: float) -> bool:
        """True once HEAD on a bucket gets the sidecar's answer through nginx; False if nginx exits or the
        deadline passes first."""
        assert self._nginx is not None and self.port is not None
        while time.monotonic() < deadline:
            if any(
                process and process.poll() is not None
                for process in (self._nginx, self._sidecar, self._relay)
            ):
                return False
            connection = (
                # Readiness only: whether the certificate is trusted is for the clients under test to judge.
                http.client.HTTPSConnection(
                    "127.0.0.1", self.port, timeout=2, context=ssl._create_unverified_context()
                )
                if self.tls
                else http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
            )
            try:
                connection.request("HEAD", _READINESS_PROBE_PATH)
                status = connection.getresponse().status
                if status in (200, 404):  # 502 means nginx is up but cannot reach the sidecar yet
                    return True
            except OSError:
                pass
            finally:
                connection.close()
            time.sleep(0.05)
        return False


def _start_announcing(command: list[str], stderr_path: Path) -> subprocess.Popen[bytes]:
    """Start one of our Python servers, importable from wherever the harness runs (installed or not); it
    announces its port on stdout."""
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(_REPOSITORY_ROOT), environment.get("PYTHONPATH")])
    )
    with open(stderr_path, "wb") as stderr:
        return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, env=environment)


def _children_of(pid: int) -> list[int]:
    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError), open(f"/proc/{entry}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[1] == str(pid):
                    children.append(int(entry))
    return children


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _current_user_if_root() -> Optional[tuple[str, str]]:
    if os.geteuid() != 0:
        return None
    return pwd.getpwuid(os.geteuid()).pw_name, grp.getgrgid(os.getegid()).gr_name


def _read_line_before(stream: IO[bytes], deadline: float) -> str:
    """One line from ``stream``, or "" if none arrives (or the writer exits) before ``deadline``."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return ""
    with selectors.DefaultSelector() as selector:  # select.select() fails on descriptors past 1024
        selector.register(stream, selectors.EVENT_READ)
        if not selector.select(remaining):
            return ""
    return stream.readline().decode(errors="replace").strip()


def _terminate(process: subprocess.Popen[bytes], whole_group: bool = False) -> None:
    """SIGTERM ``process`` and wait; SIGKILL it (and its process group if ``whole_group``) if it lingers."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=_STOP_TIMEOUT_S)
            return
        except subprocess.TimeoutExpired:
            pass
        if whole_group:
            with contextlib.suppress(ProcessLookupError):  # the group may have emptied meanwhile
                os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
    process.wait()
