"""Stream behaviour at the edges: foreign buffers, bad seeks, fork children, interpreter exit."""

from __future__ import annotations

import array
import os
import subprocess
import sys
import textwrap

import pytest

from torchdata_s3 import S3Client

pytestmark = pytest.mark.integration

DATA = bytes(range(256)) * 64  # 16 KiB


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


def test_interpreter_exits_cleanly_with_a_daemon_thread_mid_read(url: str) -> None:
    # A reader blocked on a silent server when the interpreter finalises must not abort the process.
    result = run_python(
        """
        import socket, threading, time, torchdata_s3
        silent = socket.socket(); silent.bind(("127.0.0.1", 0)); silent.listen(8)
        config = torchdata_s3.S3Config(endpoint_url=f"http://127.0.0.1:{silent.getsockname()[1]}",
                                       request_timeout_ms=60_000)
        stream = torchdata_s3.S3Client(config).open("s3://bucket/key")
        started = threading.Event()
        def reader():
            started.set()
            stream.read(4096)
        threading.Thread(target=reader, daemon=True).start()
        started.wait(); time.sleep(0.5)
        print("exiting", flush=True)
        """
    )
    assert result.returncode == 0, (result.returncode, result.stderr[-3000:])
    assert result.stdout.strip() == "exiting"


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
