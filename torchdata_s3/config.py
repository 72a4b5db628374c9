"""Client configuration: one frozen, validated object, resolved once from arguments and the environment."""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional
from urllib.parse import unquote, urlsplit
from urllib.request import proxy_bypass_environment  # type: ignore[attr-defined]  # typeshed omits it

from . import _core

__all__ = ["S3Config", "event_loop_threads"]

MiB = 1024 * 1024
# aws-c-s3's buffer pool refuses smaller memory limits, and keeps the reserve of its limit for itself.
_CRT_MIN_MEMORY_LIMIT = _core.CRT_MINIMUM_MEMORY_LIMIT_BYTES
_CRT_POOL_RESERVE = _core.CRT_POOL_RESERVE_BYTES

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _env_flag(environ: Mapping[str, str], name: str) -> Optional[bool]:
    value = environ.get(name)
    if value is None or value.strip() == "":
        return None
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"environment variable {name}={value!r} is not a boolean (use 1/0, true/false)")


@dataclass(frozen=True)
class S3Config:
    """How to reach S3 and how hard to push it. Immutable and hashable; build one with :meth:`resolve`.

    Attributes (defaults in brackets):
        region: AWS region for signing and for the default AWS endpoint ["us-east-1"].
        endpoint_url: ``http(s)://host[:port]`` of an S3-compatible endpoint [None: AWS,
            ``https://s3.<region>.amazonaws.com``].
        force_path_style: address buckets as ``/bucket/key`` instead of ``bucket.host/key``
            [None: path style exactly when ``endpoint_url`` is set].
        profile: named profile of the shared AWS config/credentials files [None].
        anonymous: send unsigned requests (public buckets) [False].
        access_key_id, secret_access_key, session_token: static credentials [None: the default chain:
            environment, profile files, web identity, container, instance metadata].
        verify_ssl: verify the server's TLS certificate [True].
        ca_file: PEM file of the CAs to trust, instead of the system store [None: the system store].
        requester_pays: every request accepts the charges of a Requester Pays bucket
            (``x-amz-request-payer: requester``), which refuses requests without it (403) [False].
        part_size_bytes: size of each ranged GET of a large object [8 MiB].
        throughput_target_gbps: what the CRT sizes its connection pool for: max(10, gbps / 0.4)
            connections [50.0: 125 connections, about the loader's 128 small objects in flight].
        max_connections: cap on connections per client [None: CRT's choice from the throughput target].
        tune_connections: learn how many of those connections to use at once from the rate bytes move at,
            fewer while the rate holds and more while it grows [False: all of them]. A near endpoint bound by
            CPU moves more bytes, at less CPU per byte, through a few; a far one needs them all. Not the
            default: in the benchmark's processes (1-4 GiB each) it did not beat using all of them
            (docs/configuration.md, "Connections").
        memory_limit_bytes: cap on the CRT's part buffers, at least 256 MiB [None: the CRT's choice for
            the throughput target, 4 GiB at 25-75 Gbps]. Memory is taken as parts arrive, not up front. The
            buffers also hold bytes handed to readers without copying, up to half of what the CRT does not
            reserve for itself ((cap - 128 MiB) / 2); beyond that, arriving parts are copied out.
        read_window_bytes: bytes one open object may buffer ahead of the reader [64 MiB].
        load_window_bytes: the read window of :func:`torchdata_s3.load`, which reads every byte of the
            checkpoint, so that it keeps more parts in flight than a stream that may stop anywhere [256 MiB:
            on an endpoint 30 ms away, a 1 GiB load took 1.8-1.9 s instead of 2.4-2.6 s with 64 MiB, for
            ~150 MiB more peak memory].
        retain_bytes: what a stream keeps of the bytes already read, so that seeking back is served from
            memory [64 MiB]: an object up to this size is kept whole (one GET, however the reader seeks);
            a larger one keeps the last part (``part_size_bytes``) read, and positions outside that are
            fetched again with ranged GETs.
        small_object_bytes: an object that the loader, the datasets or the ``torchdata.nodes`` source fetch
            with at most this many bytes (and at most ``part_size_bytes``) is yielded once all of it has
            arrived, as a read-only ``io.BytesIO`` over the bytes it was received into
            (:class:`~torchdata_s3.landed.LandedObjectStream`), not as a streaming
            :class:`~torchdata_s3.reader.S3ObjectStream` [1 MiB]: nothing is left to fetch for it, so the
            streaming layers would only cost time (a quarter of the CPU per 110 kB object, docs/streams.md).
            0: every object streams. With ``cache_dir`` set, objects are streamed through the cache.
        request_timeout_ms: the longest wait for the next piece of a response before the request is
            cancelled and :class:`~torchdata_s3.S3TimeoutError` raised [10000].
        connect_timeout_ms: TCP/TLS connect timeout per attempt [3000].
        completion_timeout_ms: the longest wait for the answer to a request that makes the store work on the
            whole object first: CompleteMultipartUpload (a writer's close), UploadPartCopy and CopyObject
            [60000, boto3's read timeout]. S3 sends whitespace while it works; a store that stays silent is
            given this long, not the third of ``request_timeout_ms`` after which a silent connection is
            otherwise dropped (a Complete cut off and sent again can fail although the first one completed).
        max_retries: retries of a failed request (5xx, SlowDown, dropped connections) [5]. 0: one attempt.
        retry_backoff_ms: the scale of the wait before a retry: retry n waits a random time up to
            2^n times this, at most 20 s ("full jitter") [500, the CRT's].
        adaptive_rate: pace requests once the endpoint throttles (503 SlowDown) [True]. From the first
            throttled answer on, the client sends at 85% of the rate the endpoint admitted, raises it while
            answers succeed and cuts it again when throttled; every attempt waits for its slot, and a
            throttled request is retried at its slot, up to ``max_throttle_retries`` times, apart from
            ``max_retries`` (docs/configuration.md, "Throttling"). False: a throttled request is retried
            like a failed one, on its own backoff, within ``max_retries``.
        max_throttle_retries: with ``adaptive_rate``, retries of a request that is throttled [20]; none
            when ``max_retries`` is 0 (one attempt, throttled or not).
        max_list_requests: ListObjectsV2 requests in flight while a prefix is listed (split into key ranges,
            see :mod:`torchdata_s3.listing`); 1 lists one page at a time [64: about 640 requests/s at
            S3's ~100 ms per page, well within the 5,500 per second S3 serves a prefix].
        multipart_threshold_bytes: a writer that is closed with at most this many bytes sends them in one
            PutObject; a larger object streams out as a multipart upload of ``part_size_bytes`` parts, up to
            10,000 of them (78 GiB at 8 MiB: raise ``part_size_bytes`` for larger objects) [8 MiB].
        write_window_bytes: bytes one writer may have handed over but not yet acknowledged by S3: parts in
            flight in parallel; ``write()`` waits beyond it, which bounds a writer's memory (this plus one
            part being filled and the writer's ``multipart_threshold_bytes`` of pending bytes) [128 MiB].
        direct_io_downloads: ``download_file`` (and fsspec's ``get_file``/``get``) write the object's parts
            with O_DIRECT, past the page cache, where the file system allows it [True]: a 4 GiB download ran
            at twice the speed and a third of the CPU of buffered writes here, and does not evict what the
            node's page cache holds. The file is then read from disk, not from memory. False: buffered writes.
        node_memory_budget_bytes: one budget for the bytes every reader and writer of every process on the
            node that uses the same budget file buffers: read windows, objects requested ahead, a writer's
            parts in flight [None: no node budget, each loader within its own ``max_inflight_bytes``;
            ``TORCHDATA_S3_NODE_MEMORY_BUDGET``]. Each open stream and writer is always granted its first part
            (two for a writer), so that no process waits for another; beyond that, windows narrow and fewer
            objects are requested ahead while the budget is spent (docs/configuration.md, "Memory per
            node").
        node_memory_budget_file: the file the processes sharing a budget name (made on first use)
            [None: ``TORCHDATA_S3_NODE_MEMORY_BUDGET_FILE``, else ``torchdata-s3-<uid>.budget`` in
            ``/dev/shm``].
        cache_dir: a local directory where the loader keeps the objects it reads, so later epochs read them
            from disk (see :mod:`torchdata_s3.cache`) [None: no cache; ``TORCHDATA_S3_CACHE_DIR``].
        cache_max_bytes: the cache's budget: least recently used objects are evicted beyond it, and objects
            larger than it are never cached [10 GiB; ``TORCHDATA_S3_CACHE_MAX_BYTES``].
        proxy_url: ``http://[user:password@]host[:port]`` of the proxy to reach the endpoint through: HTTPS
            via CONNECT, plain HTTP forwarded. "" means no proxy [None: ``HTTPS_PROXY`` for an https
            endpoint, ``HTTP_PROXY`` for an http one (lower-case names first), none for a host ``NO_PROXY``
            matches; as in the AWS CLI].
    """

    region: str = "us-east-1"
    endpoint_url: Optional[str] = None
    force_path_style: Optional[bool] = None
    profile: Optional[str] = None
    anonymous: bool = False
    access_key_id: Optional[str] = field(default=None, repr=False)
    secret_access_key: Optional[str] = field(default=None, repr=False)
    session_token: Optional[str] = field(default=None, repr=False)
    verify_ssl: bool = True
    ca_file: Optional[str] = None
    requester_pays: bool = False
    part_size_bytes: int = 8 * MiB
    throughput_target_gbps: float = 50.0
    max_connections: Optional[int] = None
    tune_connections: bool = False
    memory_limit_bytes: Optional[int] = None
    read_window_bytes: int = 64 * MiB
    load_window_bytes: int = 256 * MiB
    retain_bytes: int = 64 * MiB
    small_object_bytes: int = 1 * MiB
    request_timeout_ms: int = 10_000
    connect_timeout_ms: int = 3_000
    completion_timeout_ms: int = 60_000
    max_retries: int = 5
    retry_backoff_ms: int = 500
    adaptive_rate: bool = True
    max_throttle_retries: int = 20
    max_list_requests: int = 64
    multipart_threshold_bytes: int = 8 * MiB
    write_window_bytes: int = 128 * MiB
    direct_io_downloads: bool = True
    node_memory_budget_bytes: Optional[int] = None
    node_memory_budget_file: Optional[str] = None
    cache_dir: Optional[str] = None
    cache_max_bytes: int = 10 * 1024 * MiB
    proxy_url: Optional[str] = field(default=None, repr=False)  # may hold the proxy's password

    def __post_init__(self) -> None:
        if not self.region:
            raise ValueError("region must not be empty")
        if self.endpoint_url is not None:
            _split_endpoint(self.endpoint_url)  # validates
        if self.proxy_url:
            _split_proxy(self.proxy_url)  # validates
        if self.ca_file is not None and not os.path.isfile(self.ca_file):
            raise ValueError(
                f"ca_file {self.ca_file!r} is not a file; it must name a PEM file of trusted CAs"
            )
        if self.anonymous and (self.access_key_id or self.profile):
            raise ValueError("anonymous=True cannot be combined with access keys or a profile")
        if bool(self.access_key_id) != bool(self.secret_access_key):
            raise ValueError("access_key_id and secret_access_key must be given together")
        for name, low in (
            ("part_size_bytes", 64 * 1024),
            ("read_window_bytes", 1),
            ("load_window_bytes", 1),
            ("retain_bytes", 0),
            ("small_object_bytes", 0),
            ("multipart_threshold_bytes", 0),
            ("write_window_bytes", 1),
            ("request_timeout_ms", 1),
            ("connect_timeout_ms", 1),
            ("completion_timeout_ms", 1),
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        if (
            not isinstance(self.cache_max_bytes, int)
            or isinstance(self.cache_max_bytes, bool)
            or (self.cache_max_bytes < 1)
        ):
            raise ValueError(f"cache_max_bytes must be an integer >= 1, got {self.cache_max_bytes!r}")
        if self.node_memory_budget_bytes is not None and (
            not isinstance(self.node_memory_budget_bytes, int)
            or isinstance(self.node_memory_budget_bytes, bool)
            or self.node_memory_budget_bytes < 1
        ):
            raise ValueError(
                "node_memory_budget_bytes must be None (no node budget) or an integer >= 1, got "
                f"{self.node_memory_budget_bytes!r}"
            )
        if self.node_memory_budget_file is not None and (
            not isinstance(self.node_memory_budget_file, str) or not self.node_memory_budget_file
        ):
            raise ValueError(
                "node_memory_budget_file must be None or a non-empty path, got "
                f"{self.node_memory_budget_file!r}"
            )
        if self.cache_dir is not None and (not isinstance(self.cache_dir, str) or not self.cache_dir):
            raise ValueError(f"cache_dir must be None or a non-empty path, got {self.cache_dir!r}")
        if not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise ValueError(f"max_retries must be an integer >= 0, got {self.max_retries!r}")
        if (
            not isinstance(self.retry_backoff_ms, int)
            or isinstance(self.retry_backoff_ms, bool)
            or not 1 <= self.retry_backoff_ms <= 60_000
        ):
            raise ValueError(
                f"retry_backoff_ms must be an integer from 1 to 60000, got {self.retry_backoff_ms!r}"
            )
        if (
            not isinstance(self.max_throttle_retries, int)
            or isinstance(self.max_throttle_retries, bool)
            or self.max_throttle_retries < 0
        ):
            raise ValueError(
                f"max_throttle_retries must be an integer >= 0, got {self.max_throttle_retries!r}"
            )
        if not isinstance(self.direct_io_downloads, bool):
            raise ValueError(f"direct_io_downloads must be True or False, got {self.direct_io_downloads!r}")
        if not isinstance(self.tune_connections, bool):
            raise ValueError(f"tune_connections must be True or False, got {self.tune_connections!r}")
        if not isinstance(self.adaptive_rate, bool):
            raise ValueError(f"adaptive_rate must be True or False, got {self.adaptive_rate!r}")
        if (
            not isinstance(self.max_list_requests, int)
            or isinstance(self.max_list_requests, bool)
            or self.max_list_requests < 1
        ):
            raise ValueError(f"max_list_requests must be an integer >= 1, got {self.max_list_requests!r}")
        if self.max_connections is not None and (
            not isinstance(self.max_connections, int) or self.max_connections < 1
        ):
            raise ValueError(f"max_connections must be None or an integer >= 1, got {self.max_connections!r}")
        if self.memory_limit_bytes is not None and self.memory_limit_bytes < max(
            _CRT_MIN_MEMORY_LIMIT, _CRT_POOL_RESERVE + 2 * self.part_size_bytes
        ):
            raise ValueError(
                f"memory_limit_bytes ({self.memory_limit_bytes}) must be at least 256 MiB (the CRT's "
                f"minimum) and hold two parts beyond the CRT's 128 MiB reserve "
                f"(128 MiB + 2 * part_size_bytes = {_CRT_POOL_RESERVE + 2 * self.part_size_bytes})"
            )
        if not self.throughput_target_gbps > 0:
            raise ValueError(f"throughput_target_gbps must be > 0, got {self.throughput_target_gbps!r}")

    @classmethod
    def resolve(cls, environ: Optional[Mapping[str, str]] = None, **explicit: Any) -> S3Config:
        """Builds a config: explicit arguments (those not None) > environment > defaults.

        Environment variables read:
            ``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL``, ``S3_ENDPOINT_URL`` (the original torchdata's; may
            lack a scheme, then ``S3_USE_HTTPS`` picks it, default https), ``AWS_REGION``,
            ``AWS_DEFAULT_REGION``, ``AWS_PROFILE`` (ignored when ``AWS_ACCESS_KEY_ID`` is set: keys in the
            environment win, as in the AWS CLI), ``S3_VERIFY_SSL``, ``AWS_CA_BUNDLE`` (the CAs to trust when
            ``ca_file`` is not given, as in the AWS CLI), ``AWS_MAX_ATTEMPTS`` (``max_retries`` + 1),
            ``AWS_RETRY_MODE`` (``adaptive``: ``adaptive_rate=True``; ``standard``, ``legacy``: False),
            ``TORCHDATA_S3_CACHE_DIR``, ``TORCHDATA_S3_CACHE_MAX_BYTES``, ``TORCHDATA_S3_NODE_MEMORY_BUDGET``,
            ``TORCHDATA_S3_NODE_MEMORY_BUDGET_FILE``. Credentials in
            ``AWS_ACCESS_KEY_ID`` etc. are read by the CRT's default provider chain, not here, so they are
            never copied around.

        Raises:
            TypeError: an unknown option name.
            ValueError: an invalid value, in an argument or in the environment.
        """
        env = os.environ if environ is None else environ
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(explicit) - known)
        if unknown:
            raise TypeError(f"unknown S3 option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        values = {name: value for name, value in explicit.items() if value is not None}

        if "region" not in values:
            region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
            if region:
                values["region"] = region
        if "endpoint_url" not in values:
            endpoint = (
                env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or env.get("S3_ENDPOINT_URL")
            )
            if endpoint:
                if "://" not in endpoint:
                    use_https = _env_flag(env, "S3_USE_HTTPS")
                    endpoint = ("http://" if use_https is False else "https://") + endpoint
                values["endpoint_url"] = endpoint
        # As in the AWS CLI and SDKs, keys in the environment win over a profile named by AWS_PROFILE (a
        # profile given as an argument wins over both).
        if (
            "profile" not in values
            and not values.get("anonymous")
            and not values.get("access_key_id")
            and not env.get("AWS_ACCESS_KEY_ID")
        ):
            profile = env.get("AWS_PROFILE")
            if profile:
                values["profile"] = profile
        if "verify_ssl" not in values:
            verify = _env_flag(env, "S3_VERIFY_SSL")
            if verify is not None:
                values["verify_ssl"] = verify
        if "cache_dir" not in values and env.get("TORCHDATA_S3_CACHE_DIR", "").strip():
            values["cache_dir"] = env["TORCHDATA_S3_CACHE_DIR"].strip()
        for name, variable in (
            ("cache_max_bytes", "TORCHDATA_S3_CACHE_MAX_BYTES"),
            ("node_memory_budget_bytes", "TORCHDATA_S3_NODE_MEMORY_BUDGET"),
        ):
            if name not in values and env.get(variable, "").strip():
                budget = env[variable].strip()
                if not budget.isdigit():
                    raise ValueError(f"environment variable {variable}={budget!r} is not a number of bytes")
                values[name] = int(budget)
        if (
            "node_memory_budget_file" not in values
            and env.get("TORCHDATA_S3_NODE_MEMORY_BUDGET_FILE", "").strip()
        ):
            values["node_memory_budget_file"] = env["TORCHDATA_S3_NODE_MEMORY_BUDGET_FILE"].strip()
        if "proxy_url" not in values:
            proxy = _proxy_from_environment(env, values.get("endpoint_url"), values.get("region", cls.region))
            if proxy:
                values["proxy_url"] = proxy
        # Retries as the AWS CLI and SDKs read them: AWS_MAX_ATTEMPTS counts the first attempt too;
        # AWS_RETRY_MODE "adaptive" paces after throttling, "standard" and "legacy" do not.
        if "max_retries" not in values and env.get("AWS_MAX_ATTEMPTS", "").strip():
            attempts = env["AWS_MAX_ATTEMPTS"].strip()
            if not attempts.isdigit() or int(attempts) < 1:
                raise ValueError(f"environment variable AWS_MAX_ATTEMPTS={attempts!r} is not a number >= 1")
            values["max_retries"] = int(attempts) - 1
        if "adaptive_rate" not in values and env.get("AWS_RETRY_MODE", "").strip():
            mode = env["AWS_RETRY_MODE"].strip().lower()
            if mode not in ("adaptive", "standard", "legacy"):
                raise ValueError(
                    f"environment variable AWS_RETRY_MODE={env['AWS_RETRY_MODE']!r} is not one of adaptive, "
                    "standard, legacy"
                )
            values["adaptive_rate"] = mode == "adaptive"
        # Trust: ca_file > AWS_CA_BUNDLE > the system store, as in the AWS CLI and boto3.
        if "ca_file" not in values:
            bundle = env.get("AWS_CA_BUNDLE", "").strip()
            if bundle:
                if not os.path.isfile(bundle):
                    raise ValueError(
                        f"environment variable AWS_CA_BUNDLE={bundle!r} is not a file; it must name a "
                        "PEM file of trusted CAs (or be unset to trust the system store)"
                    )
                values["ca_file"] = bundle
        return cls(**values)

    def replace(self, **changes: Any) -> S3Config:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    @property
    def path_style(self) -> bool:
        if self.force_path_style is not None:
            return self.force_path_style
        return self.endpoint_url is not None

    def native_options(self) -> dict[str, Any]:
        """Keyword arguments for the native client (``torchdata_s3._core.S3Client``)."""
        if self.endpoint_url is None:
            scheme, host, port = "https", f"s3.{self.region}.amazonaws.com", 0
        else:
            scheme, host, port = _split_endpoint(self.endpoint_url)
        if self.anonymous:
            credentials = "anonymous"
        elif self.access_key_id:
            credentials = "static"
        elif self.profile:
            credentials = "profile"
        else:
            credentials = "default"
        proxy_host, proxy_port, proxy_username, proxy_password = (
            _split_proxy(self.proxy_url) if self.proxy_url else ("", 0, "", "")
        )
        return {
            "proxy_host": proxy_host,
            "proxy_port": proxy_port,
            "proxy_username": proxy_username,
            "proxy_password": proxy_password,
            "region": self.region,
            "endpoint_scheme": scheme,
            "endpoint_host": host,
            "endpoint_port": port,
            "path_style": self.path_style,
            "credentials": credentials,
            "profile_name": self.profile or "",
            "access_key_id": self.access_key_id or "",
            "secret_access_key": self.secret_access_key or "",
            "session_token": self.session_token or "",
            "part_size_bytes": self.part_size_bytes,
            "throughput_target_gbps": float(self.throughput_target_gbps),
            "max_connections": self.max_connections or 0,
            "tune_connections": self.tune_connections,
            "memory_limit_bytes": self.memory_limit_bytes or 0,
            "read_window_bytes": self.read_window_bytes,
            "multipart_threshold_bytes": self.multipart_threshold_bytes,
            "connect_timeout_ms": self.connect_timeout_ms,
            # A connection that moves no byte for a third of the reader's patience is dropped and its part
            # retried, so a stall is usually repaired before request_timeout_ms runs out.
            "stall_timeout_s": max(1, -(-self.request_timeout_ms // 3000)),
            "completion_timeout_ms": self.completion_timeout_ms,
            "max_retries": self.max_retries,
            "retry_backoff_ms": self.retry_backoff_ms,
            "adaptive_rate": self.adaptive_rate,
            # max_retries=0 is one attempt, throttled or not.
            "max_throttle_retries": self.max_throttle_retries if self.max_retries else 0,
            "verify_tls": self.verify_ssl,
            "ca_file": self.ca_file or "",
            "requester_pays": self.requester_pays,
            "node_budget_path": self.node_budget_path() if self.node_memory_budget_bytes else "",
            "node_budget_bytes": self.node_memory_budget_bytes or 0,
        }

    def node_budget_path(self) -> str:
        """The file of the node's memory budget: ``node_memory_budget_file``, else one per user in
        ``/dev/shm`` (memory, never written to disk; the temporary directory where there is none)."""
        if self.node_memory_budget_file:
            # One name per file: a process must open a budget file once (closing any descriptor of it drops
            # every record lock the process holds on it).
            return os.path.realpath(self.node_memory_budget_file)
        directory = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
        return os.path.join(directory, f"torchdata-s3-{os.getuid()}.budget")


def shared_file_paths(environ: Optional[Mapping[str, str]] = None) -> tuple[str, str]:
    """The shared credentials file and the shared config file the CRT reads profiles from, in that order.

    ``AWS_SHARED_CREDENTIALS_FILE`` [``~/.aws/credentials``] and ``AWS_CONFIG_FILE`` [``~/.aws/config``].
    """
    env = os.environ if environ is None else environ
    credentials = env.get("AWS_SHARED_CREDENTIALS_FILE") or os.path.join("~", ".aws", "credentials")
    config = env.get("AWS_CONFIG_FILE") or os.path.join("~", ".aws", "config")
    return os.path.expanduser(credentials), os.path.expanduser(config)


def _section_names(path: str) -> set[str]:
    """The ``[section]`` names of an INI-style AWS file; empty if it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            lines = file.read().splitlines()
    except OSError:
        return set()
    names = set()
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("[") and "]" in stripped:
            names.add(" ".join(stripped[1 : stripped.index("]")].split()))
    return names


def undefined_profile(profile: str, environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """Why the named `profile` cannot be used, or None when a shared file defines it.

    Checked in Python because the CRT, told to use a profile that does not exist, either fails with an
    unrelated error or quietly falls through to instance credentials; a named profile must never do that.
    """
    credentials_path, config_path = shared_file_paths(environ)
    if profile in _section_names(credentials_path):
        return None
    config_sections = _section_names(config_path)
    if f"profile {profile}" in config_sections or (profile == "default" and "default" in config_sections):
        return None
    return (
        f"the AWS profile {profile!r} is not defined in the shared credentials file {credentials_path} "
        f"(AWS_SHARED_CREDENTIALS_FILE) nor in the config file {config_path} (AWS_CONFIG_FILE); "
        "fix the profile name (profile=... or AWS_PROFILE) or add the profile to one of those files"
    )


def _proxy_from_environment(
    environ: Mapping[str, str], endpoint_url: Optional[str], region: str
) -> Optional[str]:
    """The proxy the AWS CLI would use for this endpoint: ``https_proxy``/``HTTPS_PROXY`` for https,
    ``http_proxy``/``HTTP_PROXY`` for http (lower case first, as curl and urllib read them), unless
    ``no_proxy``/``NO_PROXY`` names the endpoint's host."""
    if endpoint_url is None:
        scheme, host = "https", f"s3.{region}.amazonaws.com"
    else:
        scheme, host, _ = _split_endpoint(endpoint_url)
    proxy = environ.get(f"{scheme}_proxy") or environ.get(f"{scheme.upper()}_PROXY")
    if not proxy:
        return None
    no_proxy = environ.get("no_proxy") or environ.get("NO_PROXY")
    if no_proxy and proxy_bypass_environment(host.strip("[]"), proxies={"no": no_proxy}):
        return None
    return proxy


def _split_proxy(proxy_url: str) -> tuple[str, int, str, str]:
    """``(host, port, username, password)`` of an ``http://`` proxy URL; a URL without a scheme is http, as
    in the AWS CLI."""
    parts = urlsplit(proxy_url if "://" in proxy_url else f"http://{proxy_url}")
    shown = parts._replace(netloc=parts.hostname or "").geturl() if parts.password else proxy_url
    if parts.scheme != "http":
        raise ValueError(
            f"proxy {shown!r}: only http:// proxies are supported (HTTPS to the endpoint still goes "
            "through it, end to end, via CONNECT)"
        )
    if not parts.hostname:
        raise ValueError(f"proxy {shown!r} has no host")
    try:
        port = parts.port or 80
    except ValueError as error:
        raise ValueError(f"proxy {shown!r} has an invalid port") from error
    return parts.hostname, port, unquote(parts.username or ""), unquote(parts.password or "")


def _split_endpoint(endpoint_url: str) -> tuple[str, str, int]:
    parts = urlsplit(endpoint_url)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"endpoint_url {endpoint_url!r} must start with http:// or https://")
    if not parts.hostname:
        raise ValueError(f"endpoint_url {endpoint_url!r} has no host")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"endpoint_url {endpoint_url!r} must be scheme://host[:port] with no path or query")
    try:
        port = parts.port or 0
    except ValueError as error:
        raise ValueError(f"endpoint_url {endpoint_url!r} has an invalid port") from error
    host = parts.hostname
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    return parts.scheme, host, port


EVENT_LOOP_THREADS_VARIABLE = "TORCHDATA_S3_EVENT_LOOP_THREADS"
# One loop topped out near 1 GB/s while it copied every byte out of channel messages, so at least two.
# Since bodies are received in place (cmake/AwsCrtPatches.cmake) one carried 1.5-2.0 GB/s on `fast`, and
# one against two on 2 cores made no difference to CPU per small object in the harness (run 25,
# docs/benchmarks.md), so the default stayed. More loops spread connections better (the CRT puts each on a
# loop at random, and with two one loop often carries most of them), but they also take more of the cores
# from the application's threads. Measured on 2 cores, 4 loops against 2: large-object MB/s +17% on s3like
# and +14% on fast, but a Python thread's pace beside the loader fell from a median of 82% to 77% (waiting
# for a core 8-19% -> 15-27%). The default keeps the application's share; TORCHDATA_S3_EVENT_LOOP_THREADS=4
# trades it for throughput.
MIN_EVENT_LOOP_THREADS = 2


def event_loop_threads(environ: Optional[Mapping[str, str]] = None) -> int:
    """Threads of the process's CRT event loop group (``TORCHDATA_S3_EVENT_LOOP_THREADS``), shared by every
    client of the process and fixed when the first one is made.

    They receive every byte and copy it into the part buffers, so on a fast link they set the pace. The
    default is one per two usable cores, as the CRT chooses, but at least ``MIN_EVENT_LOOP_THREADS``.
    """
    env = os.environ if environ is None else environ
    value = env.get(EVENT_LOOP_THREADS_VARIABLE, "").strip()
    if not value:
        return max(MIN_EVENT_LOOP_THREADS, len(os.sched_getaffinity(0)) // 2)
    if not value.isdigit() or not 1 <= int(value) <= 255:
        raise ValueError(
            f"environment variable {EVENT_LOOP_THREADS_VARIABLE}={value!r} is not a thread count (1-255)"
        )
    return int(value)
