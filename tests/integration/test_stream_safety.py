"""Stream behaviour at the edges: foreign buffers, bad seeks, fork children, interpreter exit."""

from __future__ import annotations

import array
import hashlib
import os
import subprocess
import sys
import textwrap

import pytest

from torchdata_s3 import S3Client, _core

pytestmark = pytest.mark.integration

DATA = bytes(range(256)) * 64  # 16 KiB
MiB = 1 << 20


@pytest.fixture
def url(boto_s3, bucket: str) -> str:  # type: ignore[no-untyped-def]
    boto_s3.put_object(Bucket=bucket, Key="data", Body=DATA)
    return f"s3://{bucket}/data"


def test_readinto_accepts_contiguous_buffers_only(url: str) -> None:
    stream = S3Client().open(url)
    target = bytearray(32)
    # As io.BufferedReader refuses them (BytesIO too): strided buffers, where writing would scatter bytes,
    # and read-only ones.
    with pytest.raises((BufferError, TypeError)):
        stream.readinto(memoryview(target)[::2])
    with pytest.raises((BufferError, TypeError)):
        stream.readinto(b"read-only bytes")
    assert target == bytearray(32) and stream.tell() == 0
    large = bytearray(_core.MIN_SCATTERED_READ_BYTES)  # read past the stream's own buffer
    with pytest.raises((BufferError, TypeError)):
        stream.readinto(memoryview(large)[::2])
    with pytest.raises((BufferError, TypeError)):
        stream.readinto(bytes(large))
    assert large == bytearray(len(large)) and stream.tell() == 0
    view = memoryview(target)[8:24]
    assert stream.readinto(view) == 16
    assert target == bytes(8) + DATA[:16] + bytes(8)
    words = array.array("I", [0, 0])
    assert stream.readinto(words) == 8
    assert words.tobytes() == DATA[16:24]


def test_negative_seeks_behave_as_in_bytesio(url: str) -> None:
    stream = S3Client().open(url)
    assert stream.read(3) == DATA[:3]
    with pytest.raises(ValueError, match="negative seek value -1"):
        stream.seek(-1)
    assert stream.tell() == 3
    assert stream.seek(-10, os.SEEK_CUR) == 0  # clamped, as io.BytesIO (the original's stream) does
    assert stream.seek(-(len(DATA) + 1), os.SEEK_END) == 0
    assert stream.seek(-6, os.SEEK_END) == len(DATA) - 6
    assert stream.read() == DATA[-6:]


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )


def test_stream_inherited_by_a_fork_child_refuses_to_read(url: str) -> None:
    result = run_python(
        f"""
        import os, torchdata_s3
        stream = torchdata_s3.S3Client().open({url!r})
        assert stream.read(4) == bytes(range(4))
        pid = os.fork()
        if pid == 0:
            if stream.read(4) != bytes(range(4, 8)):  # what this process already buffered is its own
                os._exit(6)
            try:
                stream.raw.seek(0)
                stream.raw.readinto(bytearray(4))  # needs the parent's request (its held bytes)
                os._exit(3)
            except RuntimeError as error:
                if "another process" not in str(error):
                    os._exit(4)
                stream.close()  # forgets the parent's request quietly instead of raising
                os._exit(0 if stream.closed else 5)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
        assert stream.read(4) == bytes(range(4, 8))  # the parent's stream is untouched
        print("ok")
        """
    )
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-3000:]


def test_fork_children_read_while_other_threads_make_clients_and_read(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    # A DataLoader forks its workers whenever the main thread gets there, whatever other threads of the parent
    # are doing. fork() copies the forking thread only: a lock another thread held at that moment (the client
    # table's, held while a native client is made with the GIL released; the CRT runtime's) would stay held in
    # the child forever, and the child's first request would hang. Here two threads keep making clients (of
    # distinct part sizes, so the table also evicts and releases them) and reading while the main thread
    # forks children that each make a client of their own and read a whole object.
    body = os.urandom(11 * MiB)
    boto_s3.put_object(Bucket=bucket, Key="big", Body=body)
    url = f"s3://{bucket}/big"
    result = run_python(
        f"""
        import hashlib, os, random, threading, time
        from torchdata_s3 import S3Client, S3Config
        MiB = 1 << 20
        url, expected = {url!r}, {hashlib.sha256(body).hexdigest()!r}
        stop = threading.Event()
        def churn(seed):
            n = seed
            while not stop.is_set():
                n += 1
                client = S3Client(S3Config.resolve(part_size_bytes=(5 + n % 11) * MiB))
                with client.open(url) as stream:
                    while stream.read(MiB):
                        pass
        threads = [threading.Thread(target=churn, args=(seed,), daemon=True) for seed in (0, 5)]
        for thread in threads:
            thread.start()
        for fork in range(20):
            time.sleep(random.random() * 0.05)
            pid = os.fork()
            if pid == 0:
                data = S3Client(S3Config.resolve(part_size_bytes=5 * MiB)).open(url).read()
                os._exit(0 if hashlib.sha256(data).hexdigest() == expected else 3)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                time.sleep(0.01)
            else:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                print(f"child {{fork}} hung")
                break
            if os.waitstatus_to_exitcode(status) != 0:
                print(f"child {{fork}} failed: {{status}}")
                break
        else:
            print("ok")
        stop.set()
        for thread in threads:
            thread.join(60)
        """
    )
    assert result.returncode == 0 and result.stdout.strip() == "ok", (result.stdout, result.stderr[-3000:])


def test_interpreter_exits_cleanly_with_a_daemon_thread_mid_read(url: str) -> None:
    # A reader blocked on a silent server when the interpreter finalises must not abort the process.
    result = run_python(
        """
        import socket, threading, time, torchdata_s3
        silent = socket.socket(); silent.bind(("127.0.0.1", 0)); silent.listen(8)
        config = torchdata_s3.S3Config(endpoint_url=f"http://127.0.0.1:{silent.getsockname()[1]}",
                                       request_timeout_ms=60_000)
        stream = torchdata_s3.S3Client(config).open("s3://bucket/key")
        threading.Thread(target=lambda: stream.read(4096), daemon=True).start()
        # Until its request has reached the server: the reader is then blocked on the answer.
        silent.settimeout(60); silent.accept(); time.sleep(0.2)
        print("exiting", flush=True)
        """
    )
    assert result.returncode == 0, (result.returncode, result.stderr[-3000:])
    assert result.stdout.strip() == "exiting"


@pytest.mark.parametrize("exit_after_s", [0.0, 0.01, 0.02, 0.04, 0.07, 0.1])
def test_interpreter_exits_cleanly_while_a_daemon_thread_makes_clients(exit_after_s: float) -> None:
    # The first client initialises the CRT (s2n reads the system's trust store), each https one builds a TLS
    # context: with the system's OpenSSL, whose exit handler frees that state under any thread still using
    # it, a process exiting meanwhile died with SIGSEGV (17 of 24 tries making one client) before the exit
    # waited for client setups.
    result = run_python(
        f"""
        import threading, time
        from torchdata_s3 import S3Config
        from torchdata_s3.client import native_client
        def make_clients():
            for i in range(100):  # a part size each: a client each
                config = S3Config(endpoint_url="https://127.0.0.1:9", part_size_bytes=(5 + i) << 20)
                native_client(config)
        threading.Thread(target=make_clients, daemon=True).start()
        time.sleep({exit_after_s})
        print("exiting", flush=True)
        """
    )
    assert result.returncode == 0, (result.returncode, result.stderr[-3000:])
    assert result.stdout.strip() == "exiting"
    assert result.stderr == ""


def test_abandoned_loader_mid_iteration_exits_cleanly(url: str) -> None:
    result = run_python(
        f"""
        import torchdata_s3
        from torch.utils.data.datapipes.iter import IterableWrapper
        pipe = IterableWrapper([{url!r}] * 50).load_files_by_s3(prefetch=16)
        iterator = iter(pipe)
        _url, stream = next(iterator)
        stream.read(10)
        print("leaving", flush=True)
        """
    )
    assert result.returncode == 0, (result.returncode, result.stderr[-3000:])
    assert result.stdout.strip() == "leaving"
