"""What every client adapter shares: the workload context, the measurement, and the consuming loops.

An adapter implements up to four workloads as functions ``(ctx) -> Measurement``:
``text`` (DataLoader + readlines, samples/s), ``large`` and ``small`` (read every object, MB/s and
objects/s) and ``listing`` (keys/s). The timed section is inside the function, after imports and
client construction; ``ctx.verify`` asks for a content digest (computed only in the untimed check run).
"""

from __future__ import annotations

import resource
import time
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Optional

from benchmarks.endpoint.process_cpu import machine_cpu_seconds

MiB = 1024 * 1024
READ_SIZE = MiB  # what every streaming reader asks for per read() call


@dataclass
class Context:
    endpoint_url: str
    bucket: str
    prefix: str  # e.g. "large/"
    keys: list[str]
    verify: bool = False
    batch_size: int = 512
    num_workers: int = 0
    region: str = "us-east-1"
    sizes: list[int] = field(default_factory=list)  # of `keys`, from the dataset's manifest
    options: dict = field(default_factory=dict)  # client-specific settings (ours: S3Config fields)
    # What a `random` case reads of its one object: {"format": "parquet", "columns": [...]} or
    # {"format": "zip", "members": [...]}.
    selection: dict = field(default_factory=dict)
    epochs: int = 2  # passes over the dataset in the `epochs` workload
    # The harness's data directory (``<local_dir>/<bucket>/<key>``: the files the endpoint serves), for the
    # local-disk ceiling; the `epochs` workload's caches are made under it too, on the same disk.
    local_dir: str = ""
    # Write workloads: the embedded endpoint's data directory, where written objects land as
    # ``<served_dir>/<bucket>/<key>`` and are read back from for the content check; "" (an external endpoint):
    # read back and delete through S3 (see benchmarks.writes).
    served_dir: str = ""
    # listing-scale: where the untimed check run lists (the same generated keys with no page latency), and
    # the first and last key every timed run must also see (checked after its clock stops).
    verify_endpoint_url: str = ""
    expected_first_key: str = ""
    expected_last_key: str = ""

    def urls(self) -> list[str]:
        return [f"s3://{self.bucket}/{key}" for key in self.keys]

    def http_urls(self) -> list[str]:
        from urllib.parse import quote

        return [f"{self.endpoint_url}/{self.bucket}/{quote(key)}" for key in self.keys]


@dataclass
class Measurement:
    items: int  # objects, samples (lines) or keys
    bytes: int
    seconds: float
    digest: Optional[int] = None  # sum of crc32 over objects / lines / keys, mod 2**64
    # CPU (user + system) of the whole measuring process, all its threads, plus its child processes that
    # ended within the timed section (DataLoader workers, curl), over the timed section only.
    cpu_seconds: Optional[float] = None
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Digest:
    """Order-independent content digest: the sum of crc32 of each object (or line, or key)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.total = 0

    def add(self, crc: int) -> None:
        self.total = (self.total + crc) % (1 << 64)

    def value(self) -> Optional[int]:
        return self.total if self.enabled else None


def process_cpu_seconds() -> float:
    """User + system CPU of this process (every thread: getrusage's RUSAGE_SELF is per process) and of its
    waited-for children (a DataLoader's workers once joined, a curl once it exited). A child still running
    is not in it: the timed sections here end after their workers are joined. (getrusage, not os.times:
    times() counts in 10 ms ticks, too coarse for a small object.)"""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


_rss_baseline_bytes: Optional[int] = None


def reset_peak_rss() -> None:
    """Marks the start of the work whose memory is measured, after its set-up (e.g. data to upload, generated
    in memory): resets the process's peak RSS (VmHWM, by writing 5 to /proc/self/clear_refs) to its current
    RSS, which becomes the baseline of the RSS growth reported (see :func:`rss_baseline_bytes`)."""
    global _rss_baseline_bytes
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")
    with open("/proc/self/statm") as statm:
        _rss_baseline_bytes = int(statm.read().split()[1]) * resource.getpagesize()


def rss_baseline_bytes() -> Optional[int]:
    """The RSS recorded by :func:`reset_peak_rss`, or None if it was not called."""
    return _rss_baseline_bytes


class MachineTime:
    """The whole machine's CPU over this process's timed sections (every Stopwatch), in seconds: what the
    client, the endpoint and the kernel used (``busy_seconds``) out of what the CPUs had
    (``available_seconds``). A run that leaves CPU idle is not bound by CPU, whatever its CPU per GB: the
    evidence a ceiling needs."""

    busy_seconds = 0.0
    available_seconds = 0.0

    @classmethod
    def add(cls, started: tuple[float, float], ended: tuple[float, float]) -> None:
        """One timed section, from two readings of :func:`machine_cpu_seconds`."""
        cls.busy_seconds += ended[0] - started[0]
        cls.available_seconds += ended[1] - started[1]


class Stopwatch:
    """The timed section: wall seconds (``seconds``) and the process's CPU seconds (``cpu_seconds``); the
    machine's, in :class:`MachineTime`."""

    def __enter__(self) -> Stopwatch:
        self.machine_started = machine_cpu_seconds()
        self.cpu_started = process_cpu_seconds()
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.started
        self.cpu_seconds = process_cpu_seconds() - self.cpu_started
        MachineTime.add(self.machine_started, machine_cpu_seconds())


def read_stream(read: Callable[[int], bytes], digest: Digest) -> int:
    """Drains a file-like's read() in READ_SIZE calls; returns the byte count and feeds the digest."""
    total = 0
    crc = 0
    while True:
        chunk = read(READ_SIZE)
        if not chunk:
            break
        total += len(chunk)
        if digest.enabled:
            crc = zlib.crc32(chunk, crc)
    if digest.enabled:
        digest.add(crc)
    return total


def consume_objects(streams: Iterable[Any], ctx: Context) -> Measurement:
    """Times reading every (url, file-like) pair to the end."""
    digest = Digest(ctx.verify)
    objects = total = 0
    with Stopwatch() as watch:
        for _url, stream in streams:
            total += read_stream(stream.read, digest)
            objects += 1
    return Measurement(objects, total, watch.seconds, digest.value(), watch.cpu_seconds)


def consume_pieces(
    streams: Iterable[Any], ctx: Context, pieces: Callable[[Any], Iterable[Any]]
) -> Measurement:
    """Times draining every (url, stream) pair through ``pieces(stream)``: the buffers (chunks, lines, the
    filled part of a reused buffer) a way of reading hands over, in order, up to the end of the object."""
    digest = Digest(ctx.verify)
    objects = total = 0
    with Stopwatch() as watch:
        for _url, stream in streams:
            crc = 0
            for piece in pieces(stream):
                total += len(piece)
                if digest.enabled:
                    crc = zlib.crc32(piece, crc)
            if digest.enabled:
                digest.add(crc)
            objects += 1
    return Measurement(objects, total, watch.seconds, digest.value(), watch.cpu_seconds)


def consume_whole_objects(streams: Iterable[Any], ctx: Context) -> Measurement:
    """Times reading every (url, file-like) pair with one read() each."""
    return consume_bytes_objects((stream.read() for _url, stream in streams), ctx)


def consume_bytes_objects(blobs: Iterator[bytes], ctx: Context) -> Measurement:
    """Times an iterator that yields each object's content whole."""
    digest = Digest(ctx.verify)
    objects = total = 0
    with Stopwatch() as watch:
        for blob in blobs:
            total += len(blob)
            objects += 1
            if digest.enabled:
                digest.add(zlib.crc32(blob))
    return Measurement(objects, total, watch.seconds, digest.value(), watch.cpu_seconds)


def consume_text(make_loader: Callable[[], Iterable[Any]], ctx: Context) -> Measurement:
    """Times iterating a DataLoader of line batches (lines without their newline, bytes or str)."""
    digest = Digest(ctx.verify)
    lines = total = 0
    with Stopwatch() as watch:
        for batch in make_loader():
            lines += len(batch)
            for line in batch:
                data = line.encode() if isinstance(line, str) else line
                total += len(data)
                if digest.enabled:
                    digest.add(zlib.crc32(data))
    return Measurement(lines, total, watch.seconds, digest.value(), watch.cpu_seconds)


def consume_keys(keys: Iterable[str], ctx: Context) -> Measurement:
    digest = Digest(ctx.verify)
    count = 0
    with Stopwatch() as watch:
        for key in keys:
            count += 1
            if digest.enabled:
                digest.add(zlib.crc32(key.encode()))
    return Measurement(count, 0, watch.seconds, digest.value(), watch.cpu_seconds)


def ordered_digest(keys: Iterable[str]) -> int:
    """CRC-32 of the keys in order, each followed by a newline: equal only for the same keys in the same
    order (listing-scale's check; :class:`Digest` is order-independent)."""
    crc = 0
    for key in keys:
        crc = zlib.crc32(key.encode("utf-8", "surrogatepass") + b"\n", crc)
    return crc


def consume_listing(keys: Iterable[str], ctx: Context) -> Measurement:
    """The listing-scale workload's timed loop: counts the keys as user code sees them, with the time to the
    first (``extra["first_key_seconds"]``). The check run (``ctx.verify``) also digests them in order. After
    the clock: the first and last key must be the expected ones, or it raises (a partial or misordered
    listing must not be timed as if complete)."""
    count = 0
    first = last = ""
    first_seconds = None
    crc = 0
    with Stopwatch() as watch:
        iterator = iter(keys)
        for key in iterator:
            first_seconds = time.perf_counter() - watch.started
            first = last = key
            count = 1
            if ctx.verify:
                crc = zlib.crc32(key.encode("utf-8", "surrogatepass") + b"\n", crc)
            break
        if ctx.verify:
            for key in iterator:
                count += 1
                crc = zlib.crc32(key.encode("utf-8", "surrogatepass") + b"\n", crc)
                last = key
        else:
            for key in iterator:
                count += 1
                last = key
    if ctx.expected_first_key and (first, last) != (ctx.expected_first_key, ctx.expected_last_key):
        raise RuntimeError(
            f"listed {count} keys from {first!r} to {last!r}; expected {ctx.expected_first_key!r} to "
            f"{ctx.expected_last_key!r}"
        )
    extra = {"first_key_seconds": first_seconds}
    return Measurement(count, 0, watch.seconds, crc if ctx.verify else None, watch.cpu_seconds, extra)


def bucket_and_key(url: str) -> tuple[str, str]:
    """'s3://bucket/key' -> ('bucket', 'key')."""
    bucket, key = url[len("s3://") :].split("/", 1)
    return bucket, key


def strip_bucket(url_or_key: str, bucket: str) -> str:
    """'s3://bucket/k' or 'bucket/k' -> 'k'."""
    for head in (f"s3://{bucket}/", f"{bucket}/"):
        if url_or_key.startswith(head):
            return url_or_key[len(head) :]
    return url_or_key


class _Pacer:
    """A pure-Python counting loop in its own thread: how often it gets the GIL (and a core) per second.

    The thread also records the scheduler's view of itself (``/proc/thread-self/schedstat``: time on a
    core, time runnable but waiting for one), so lost pace splits into waiting for a core (CPU contention on
    a small machine) and the rest, which for this loop is waiting for the GIL.
    """

    def __init__(self) -> None:
        import threading

        self.count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self.on_core_s = self.waiting_for_core_s = 0.0

    @staticmethod
    def _schedstat() -> tuple[float, float]:
        try:
            with open("/proc/thread-self/schedstat") as stat:
                on_core, waiting, _slices = (int(v) for v in stat.read().split())
            return on_core / 1e9, waiting / 1e9
        except (OSError, ValueError):
            return 0.0, 0.0

    def _spin(self) -> None:
        stop = self._stop
        on_core, waiting = self._schedstat()
        while not stop.is_set():
            for _ in range(1000):
                self.count += 1
        on_core_end, waiting_end = self._schedstat()
        self.on_core_s, self.waiting_for_core_s = on_core_end - on_core, waiting_end - waiting

    def __enter__(self) -> _Pacer:
        self.started = time.perf_counter()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.seconds = time.perf_counter() - self.started
        self.rate = self.count / self.seconds


def gil_pace(read_objects: Callable[[Context], Measurement]) -> Callable[[Context], Measurement]:
    """The ``gil`` workload: a Python thread's pace while the client reads the large objects, relative to
    its pace alone (``extra["pace_percent"]``). 100% means the client never kept the thread from running.
    ``extra`` also splits the thread's time beside the client into on a core, waiting for a core, and
    waiting for the GIL (the rest), in percent of the wall time."""

    def measure(ctx: Context) -> Measurement:
        with _Pacer() as alone:
            time.sleep(1.0)
        with _Pacer() as beside:
            measurement = read_objects(ctx)
        measurement.extra["pace_percent"] = 100.0 * beside.rate / alone.rate
        wall = beside.seconds
        measurement.extra["on_core_percent"] = 100.0 * beside.on_core_s / wall
        measurement.extra["waiting_for_core_percent"] = 100.0 * beside.waiting_for_core_s / wall
        measurement.extra["waiting_for_gil_percent"] = (
            100.0 * max(0.0, wall - beside.on_core_s - beside.waiting_for_core_s) / wall
        )
        return measurement

    return measure


def after_switch(
    switch: Callable[[], object], workload: Callable[[Context], Measurement]
) -> Callable[[Context], Measurement]:
    """`workload`, measured after `switch()` turned one of our process-wide mechanisms off: the variants of
    ours that show what a mechanism saves in the same run. Each measurement is a process of its own, so
    nothing else sees the switch; it is thrown before the client makes any connection."""

    def measure(ctx: Context) -> Measurement:
        switch()
        return workload(ctx)

    return measure


def with_options(
    options: dict[str, object], workload: Callable[[Context], Measurement]
) -> Callable[[Context], Measurement]:
    """`workload` with `options` added to the S3Config its client is made from: the variants of ours that show
    what one setting is worth in the same run."""

    def measure(ctx: Context) -> Measurement:
        return workload(replace(ctx, options={**ctx.options, **options}))

    return measure
