"""One memory budget per node (``S3Config.node_memory_budget_bytes``): DataLoader workers, readers and writers
of several processes take what they buffer from one budget file, every byte still arrives, and a process
killed while it holds bytes does not keep them from the others."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import random
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from torch.utils.data import DataLoader
from torch.utils.data.datapipes.iter import IterableWrapper

from torchdata_s3 import S3Client, S3Config, S3FileLoader

pytestmark = pytest.mark.integration

MiB = 1024 * 1024
PART = 5 * MiB
OBJECTS = 6
SIZE = 21 * MiB + 12345  # five parts, the last one short
WORKERS = 2


def body(index: int) -> bytes:
    return random.Random(index).randbytes(SIZE)


@pytest.fixture(scope="module")
def bodies() -> list[bytes]:
    return [body(index) for index in range(OBJECTS)]


@pytest.fixture
def objects(boto_s3, bucket: str, bodies: list[bytes]) -> list[str]:  # type: ignore[no-untyped-def]
    for index, data in enumerate(bodies):
        boto_s3.put_object(Bucket=bucket, Key=f"big{index}", Body=data)
    return [f"s3://{bucket}/big{index}" for index in range(OBJECTS)]


def config_for(endpoint: str, budget_file: Path, budget: int) -> S3Config:
    return S3Config.resolve(
        endpoint_url=endpoint,
        part_size_bytes=PART,
        multipart_threshold_bytes=PART,
        node_memory_budget_bytes=budget,
        node_memory_budget_file=str(budget_file),
    )


def _digest(item: tuple) -> tuple[str, str]:
    url, stream = item
    return url, hashlib.sha256(stream.read()).hexdigest()


def digests(urls: list[str], config: S3Config, workers: int) -> dict[str, str]:
    loader = S3FileLoader(IterableWrapper(urls).sharding_filter(), config=config)
    pipe = loader.map(_digest)
    found: dict[str, str] = {}
    for url, digest in DataLoader(pipe, batch_size=None, num_workers=workers):
        found[url] = digest
    return found


def test_dataloader_workers_stay_within_one_budget_and_read_every_byte(
    s3_endpoint: str, objects: list[str], bodies: list[bytes], tmp_path: Path
) -> None:
    expected = {url: hashlib.sha256(data).hexdigest() for url, data in zip(objects, bodies)}
    # Unbounded first (a limit nothing reaches, counted the same way): what the workers buffer on their own.
    unbounded = config_for(s3_endpoint, tmp_path / "unbounded.budget", 1 << 50)
    assert digests(objects, unbounded, WORKERS) == expected
    free_peak = S3Client(unbounded).node_budget.peak  # type: ignore[union-attr]

    budget = 4 * PART
    bounded = config_for(s3_endpoint, tmp_path / "bounded.budget", budget)
    assert digests(objects, bounded, WORKERS) == expected
    node = S3Client(bounded).node_budget
    assert node is not None
    # Each worker's first part of the stream it reads is guaranteed, and kept free for it (the reserve) once
    # it is attached: a worker attaching after the other spent the budget still gets its first part at once.
    assert node.peak <= budget + (WORKERS - 1) * PART, (node.peak, free_peak)
    assert free_peak > 2 * budget, "the workers would not have needed more: nothing was tested"
    assert node.in_use == 0  # every worker gave back what it held (or exited and was reclaimed)


def test_a_writer_holds_no_more_than_the_budget_grants(
    s3_endpoint: str, bucket: str, boto_s3, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    budget = 2 * PART  # what a writer is guaranteed: one part in flight, one being filled
    config = config_for(s3_endpoint, tmp_path / "writer.budget", budget).replace(write_window_bytes=64 * MiB)
    client = S3Client(config)
    node = client.node_budget
    assert node is not None
    data = random.Random(7).randbytes(6 * PART + 999)
    with client.open(f"s3://{bucket}/written", "wb") as writer:
        for start in range(0, len(data), 3 * MiB):
            writer.write(data[start : start + 3 * MiB])
            assert node.in_use <= budget
    assert node.peak <= budget
    assert node.in_use == 0
    stored = boto_s3.get_object(Bucket=bucket, Key="written")["Body"].read()
    assert hashlib.sha256(stored).digest() == hashlib.sha256(data).digest()


def _hold_a_stream(url: str, config: S3Config, ready: multiprocessing.synchronize.Event) -> None:
    stream = S3Client(config).open(url)
    stream.read(1)  # its window is open: it holds the budget's bytes
    ready.set()
    time.sleep(120)


def test_bytes_held_by_a_killed_process_come_back(
    s3_endpoint: str, objects: list[str], bodies: list[bytes], tmp_path: Path
) -> None:
    budget = 4 * PART
    config = config_for(s3_endpoint, tmp_path / "killed.budget", budget)
    node = S3Client(config).node_budget
    assert node is not None
    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    holder = context.Process(target=_hold_a_stream, args=(objects[0], config, ready), daemon=True)
    holder.start()
    try:
        assert ready.wait(60)
        held = node.in_use
        assert held >= PART
    finally:
        os.kill(holder.pid, signal.SIGKILL)  # type: ignore[arg-type]
        holder.join(10)
    # The dead process's slot is taken back by the first process short of bytes: this read gets a full window.
    with S3Client(config).open(objects[1]) as stream:
        assert hashlib.sha256(stream.read()).digest() == hashlib.sha256(bodies[1]).digest()
    assert node.reclaimed >= held
    assert node.in_use == 0


def test_the_environment_turns_the_budget_on(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TORCHDATA_S3_NODE_MEMORY_BUDGET", str(64 * MiB))
    monkeypatch.setenv("TORCHDATA_S3_NODE_MEMORY_BUDGET_FILE", str(tmp_path / "env.budget"))
    config = S3Config.resolve()
    assert config.node_memory_budget_bytes == 64 * MiB
    assert config.node_budget_path() == str(tmp_path / "env.budget")
    monkeypatch.setenv("TORCHDATA_S3_NODE_MEMORY_BUDGET", "1G")
    with pytest.raises(ValueError, match="TORCHDATA_S3_NODE_MEMORY_BUDGET='1G' is not a number of bytes"):
        S3Config.resolve()


def test_an_unusable_budget_file_is_an_error_naming_it(
    s3_endpoint: str, objects: list[str], tmp_path: Path
) -> None:
    bad = tmp_path / "not-a-budget"
    bad.write_bytes(b"something else")
    config = config_for(s3_endpoint, bad, 64 * MiB)
    with pytest.raises(
        OSError, match=f"node memory budget {bad}: is not a budget file.*node_memory_budget_file"
    ):
        S3Client(config).open(objects[0]).read(1)


def test_no_budget_by_default(s3_endpoint: str) -> None:
    assert S3Config.resolve().node_memory_budget_bytes is None
    assert S3Client(S3Config.resolve()).node_budget is None


@pytest.fixture(autouse=True)
def _no_budget_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("TORCHDATA_S3_NODE_MEMORY_BUDGET", raising=False)
    monkeypatch.delenv("TORCHDATA_S3_NODE_MEMORY_BUDGET_FILE", raising=False)
    yield


def test_a_failed_read_and_a_failed_upload_give_their_bytes_back_before_they_are_closed(
    s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    from torchdata_s3 import S3FileNotFoundError, S3ObjectExistsError

    config = config_for(s3_endpoint, tmp_path / "failures.budget", 64 * MiB)
    client = S3Client(config)
    node = client.node_budget
    assert node is not None
    missing = client.open_native(S3Client._object_location(f"s3://{bucket}/missing"))
    with pytest.raises(S3FileNotFoundError):
        missing.read(1)
    assert node.in_use == 0  # the stream object is still alive
    with client.open(f"s3://{bucket}/taken", "wb") as writer:
        writer.write(b"first")
    writer = client.open(f"s3://{bucket}/taken", "wb", overwrite=False)
    writer.write(random.Random(3).randbytes(2 * PART))  # multipart: parts in flight hold the budget
    with pytest.raises(S3ObjectExistsError):
        writer.close()
    assert node.in_use == 0
    del missing, writer
