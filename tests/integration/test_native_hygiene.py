"""Native resources over a process's life: clients come and go without leaving threads, descriptors or
memory behind, and the interpreter exits promptly and quietly with work abandoned mid-flight.

Each check runs in a fresh interpreter, so that what other tests left alive (cached clients, the CRT's
per-process event loops) cannot hide or fake a leak. Also run under ASan + UBSan by scripts/sanitize.sh.
See also tests/integration/test_stream_safety.py (exit with a reader blocked in a daemon thread, and with a
loader abandoned mid-iteration).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.integration

MiB = 1024 * 1024
WARM_UP_CYCLES = 20
MEASURED_CYCLES = 180
# Measured on 2 cores: 180 clean cycles grow RSS by ~64 KiB; 180 clients kept alive add ~11 MiB (plus 2
# threads and 4 descriptors each). 4 MiB catches a leak of ~25 KiB per client and leaves room for noise.
RSS_GROWTH_LIMIT_BYTES = 4 * MiB
# Under ASan (scripts/sanitize.sh) each cycle is several times slower and RSS is meaningless (freed memory
# sits in quarantine): fewer cycles still show leaked threads and descriptors, and run every client's
# construction and shutdown under the sanitizers.
SANITIZED_WARM_UP_CYCLES = 5
SANITIZED_MEASURED_CYCLES = 45
EXIT_TIME_LIMIT_S = 30.0  # a fresh interpreter importing torch takes a few seconds, more under ASan


def run_python(code: str, *args: str, timeout_s: float = 300) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), PYTHONFAULTHANDLER="1"),
    )
    return result, time.monotonic() - started


def under_address_sanitizer() -> bool:
    return "libasan" in os.environ.get("LD_PRELOAD", "")


LEAK_PROBE = """
    import gc, json, os, sys, time
    from torchdata_s3 import S3Config, _core

    bucket = sys.argv[1]
    payload_size, warm_up, measured = (int(argument) for argument in sys.argv[2:5])
    options = S3Config.resolve().native_options()
    page_bytes = os.sysconf("SC_PAGE_SIZE")

    def usage():
        with open("/proc/self/statm") as statm:
            rss = int(statm.read().split()[1]) * page_bytes
        threads, fds = len(os.listdir("/proc/self/task")), len(os.listdir("/proc/self/fd"))
        return {"threads": threads, "fds": fds, "rss": rss}

    def cycle():
        # The native constructor, not torchdata_s3.client, which keeps one client per configuration.
        client = _core.S3Client(**options)
        objects, _prefixes, _token = client.list_objects_v2(bucket, timeout_ms=10_000)
        assert [entry[0] for entry in objects] == ["object"], objects
        stream = client.get_object(bucket, "object", timeout_ms=10_000)
        assert len(stream.read()) == payload_size
        stream.close()
        del stream, client
        gc.collect()

    def settled(baseline):
        # A client's shutdown completes on CRT threads; give descriptors and threads a moment to go.
        deadline = time.monotonic() + 5
        while True:
            now = usage()
            back = now["threads"] <= baseline["threads"] and now["fds"] <= baseline["fds"]
            if back or time.monotonic() > deadline:
                return now
            time.sleep(0.05)

    before = usage()
    for _ in range(warm_up):
        cycle()
    warm = settled(before)
    for _ in range(measured):
        cycle()
    print(json.dumps({"before": before, "warm": warm, "after": settled(warm)}))
"""


def test_many_clients_created_and_destroyed_leak_no_threads_descriptors_or_memory(
    boto_s3, bucket: str
) -> None:  # type: ignore[no-untyped-def]
    payload_size = 256 * 1024
    boto_s3.put_object(Bucket=bucket, Key="object", Body=os.urandom(payload_size))

    sanitized = under_address_sanitizer()
    warm_up = SANITIZED_WARM_UP_CYCLES if sanitized else WARM_UP_CYCLES
    measured = SANITIZED_MEASURED_CYCLES if sanitized else MEASURED_CYCLES

    result, _elapsed = run_python(
        LEAK_PROBE, bucket, str(payload_size), str(warm_up), str(measured), timeout_s=600
    )

    assert result.returncode == 0, (result.returncode, result.stderr[-3000:])
    usage = json.loads(result.stdout)
    warm, after = usage["warm"], usage["after"]
    assert after["threads"] <= warm["threads"], usage  # every client's threads are gone
    assert after["fds"] <= warm["fds"], usage  # every connection and event descriptor is closed
    if not sanitized:
        assert after["rss"] - warm["rss"] < RSS_GROWTH_LIMIT_BYTES, usage
    # The CRT's process-wide event loops are made once (by the first client), not once per client.
    assert warm["threads"] - usage["before"]["threads"] <= os.cpu_count() * 2 + 4, usage


MANY_CONFIGURATIONS_PROBE = """
    import gc, json, os
    from torchdata_s3 import S3Config
    from torchdata_s3.client import KEPT_NATIVE_CLIENTS, native_client

    def usage():
        return {"threads": len(os.listdir("/proc/self/task")), "fds": len(os.listdir("/proc/self/fd"))}

    def config(port, **options):
        # Nothing listens there: making a client connects nowhere.
        endpoint = f"http://127.0.0.1:{port}"
        return S3Config(endpoint_url=endpoint, anonymous=True, region="us-east-1", **options)

    first = native_client(config(1))
    shared = native_client(config(1, cache_dir="/nonexistent", retain_bytes=0)) is first
    for port in range(2, KEPT_NATIVE_CLIENTS + 1):
        native_client(config(port))
    del first
    full = usage()
    for port in range(KEPT_NATIVE_CLIENTS + 1, 4 * KEPT_NATIVE_CLIENTS + 1):
        native_client(config(port))
        gc.collect()
    print(json.dumps({"shared": shared, "full": full, "after": usage()}))
"""


def test_a_process_trying_many_endpoints_keeps_a_bounded_number_of_clients() -> None:
    """Native clients are kept per native configuration, at most KEPT_NATIVE_CLIENTS of them: a process that
    tries many endpoints does not keep every client's event loops and threads until it exits."""
    result, _elapsed = run_python(MANY_CONFIGURATIONS_PROBE)
    assert result.returncode == 0, (result.returncode, result.stderr[-3000:])
    usage = json.loads(result.stdout)
    assert usage["shared"], "configurations that differ only in Python's options must share one client"
    full, after = usage["full"], usage["after"]
    # Three times as many clients made since the cache was full: one dropped for each made.
    assert after["threads"] <= full["threads"] + 2, usage
    assert after["fds"] <= full["fds"] + 2, usage


ABANDONED_WORK = {
    # Several large objects downloading (GIL-free, on CRT threads) when the interpreter finalises.
    "loader_with_large_objects_in_flight": """
        from torch.utils.data.datapipes.iter import IterableWrapper
        import torchdata_s3
        pipe = IterableWrapper([f"s3://{bucket}/large-{i}" for i in range(4)]).load_files_by_s3(prefetch=4)
        iterator = iter(pipe)
        _url, stream = next(iterator)
        stream.read(1024)
    """,
    # A listing stopped between pages; its generator is never closed.
    "lister_between_pages": """
        from torch.utils.data.datapipes.iter import IterableWrapper
        import torchdata_s3
        iterator = iter(IterableWrapper([f"s3://{bucket}/small/"]).list_files_by_s3(page_size=2))
        next(iterator)
    """,
    # Streams opened and never read, from clients of several configurations, all alive at exit.
    "unread_streams_of_several_clients": """
        import torchdata_s3
        streams = [
            torchdata_s3.S3Client(torchdata_s3.S3Config.resolve(part_size_bytes=(5 + i) * 1024 * 1024)).open(
                f"s3://{bucket}/large-{i}"
            )
            for i in range(4)
        ]
    """,
}


@pytest.mark.parametrize("scenario", sorted(ABANDONED_WORK))
def test_interpreter_exits_promptly_and_quietly_with_work_abandoned(
    boto_s3, bucket: str, scenario: str
) -> None:  # type: ignore[no-untyped-def]
    for i in range(4):
        boto_s3.put_object(Bucket=bucket, Key=f"large-{i}", Body=bytes(16 * MiB))
    for i in range(5):
        boto_s3.put_object(Bucket=bucket, Key=f"small/{i}", Body=b"x")

    code = (
        f"bucket = {bucket!r}\n"
        + textwrap.dedent(ABANDONED_WORK[scenario])
        + '\nprint("leaving", flush=True)\n'
    )
    result, elapsed = run_python(code, timeout_s=120)

    assert result.returncode == 0, (result.returncode, result.stderr[-3000:])
    assert result.stdout.strip() == "leaving"
    # No "Exception ignored in ...", no warning, no sanitizer or fault report on the way out.
    assert result.stderr == "", result.stderr[-3000:]
    assert elapsed < EXIT_TIME_LIMIT_S, f"exit took {elapsed:.1f} s"
