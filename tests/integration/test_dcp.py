"""torchdata_s3.dcp against a real S3-protocol server: dcp.save / dcp.load of a state dict sharded over two
torchrun ranks (gloo on CPU), resharding from 2 ranks to 1 and from 1 to 2, saving again over a checkpoint,
and a save interrupted by a failure."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException

from tests.fault_proxy import Fault, FaultProxy, operation_is
from tests.integration.dcp_state import assert_holds, state_dict
from tests.readme import readme_example
from tests.s3_server import MotoServer
from torchdata_s3 import InvalidS3UrlError, S3NetworkError, S3ObjectExistsError
from torchdata_s3.dcp import S3StorageReader, S3StorageWriter

pytestmark = [
    pytest.mark.integration,
    # One process saving or loading (no_dist=True): torch says so every time, as a warning.
    pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning"),
]

SCRIPT = Path(__file__).with_name("dcp_ranks.py")
RANKS = 2


def the_error(failure: CheckpointException) -> BaseException:
    """What the one process raised; torch wraps it (and the errors of all ranks) in a CheckpointException."""
    assert list(failure.failures) == [0], failure
    return failure.failures[0][0]


def keys(boto_s3, bucket: str, prefix: str) -> list[str]:  # type: ignore[no-untyped-def]
    listing = boto_s3.list_objects_v2(Bucket=bucket, Prefix=prefix)
    return sorted(entry["Key"][len(prefix) :] for entry in listing.get("Contents", []))


def test_two_ranks_save_shards_and_either_number_of_ranks_loads_them(
    boto_s3,
    bucket: str,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    # Version 1 saved by one process, for the two ranks to load (1 -> 2).
    dcp.save(state_dict(1), storage_writer=S3StorageWriter(f"s3://{bucket}/one"), no_dist=True)
    example = tmp_path / "checkpoint_dcp.py"
    example.write_text(readme_example("# checkpoint_dcp.py"))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",  # what the `torchrun` command runs, with this interpreter
            "--standalone",
            "--nproc_per_node",
            str(RANKS),
            str(SCRIPT),
            f"s3://{bucket}/two/",
            f"s3://{bucket}/one",
            str(example),
            f"s3://{bucket}/example",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), GLOO_SOCKET_IFNAME="lo"),
    )
    assert result.returncode == 0, result.stderr[-6000:]

    # Each rank wrote its own shard objects; .metadata names them all.
    written = keys(boto_s3, bucket, "two/")
    assert ".metadata" in written
    assert {name.split("_")[2] for name in written if name.endswith(".distcp")} == {"0", "1"}, written
    # Version 2, saved by the two ranks, loaded whole by one process (2 -> 1).
    target = state_dict(2, empty=True)
    dcp.load(target, storage_reader=S3StorageReader(f"s3://{bucket}/two"), no_dist=True)
    assert_holds(target, 2)
    assert ".metadata" in keys(boto_s3, bucket, "example/")


def test_saving_again_replaces_the_checkpoint_and_its_objects(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    url = f"s3://{bucket}/ckpt"
    dcp.save(state_dict(1), storage_writer=S3StorageWriter(url), no_dist=True)
    first = keys(boto_s3, bucket, "ckpt/")
    dcp.save(state_dict(2), storage_writer=S3StorageWriter(url, checksum="crc32c"), no_dist=True)
    second = keys(boto_s3, bucket, "ckpt/")
    # New data objects beside the old ones until .metadata switched; then the old ones were deleted.
    assert set(first) & set(second) == {".metadata"}, (first, second)
    target = state_dict(2, empty=True)
    dcp.load(target, storage_reader=S3StorageReader(url), no_dist=True)
    assert_holds(target, 2)

    with pytest.raises(CheckpointException) as refused:
        dcp.save(state_dict(3), storage_writer=S3StorageWriter(url, overwrite=False), no_dist=True)
    error = the_error(refused.value)
    assert isinstance(error, S3ObjectExistsError) and isinstance(error, FileExistsError)
    assert f"{url}/.metadata" in str(error) and "already exists" in str(error)
    assert keys(boto_s3, bucket, "ckpt/") == second  # nothing written
    dcp.load(target, storage_reader=S3StorageReader(url), no_dist=True)
    assert_holds(target, 2)


class Unpicklable:
    def __reduce__(self) -> tuple:
        raise RuntimeError("this value cannot be saved")


# torch's writer threads let the failure escape (S3StorageWriter collects it and raises it from dcp.save).
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_an_interrupted_save_leaves_no_checkpoint_and_load_says_so(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    url = f"s3://{bucket}/broken"
    state = state_dict(1)
    state["bad"] = Unpicklable()  # torch pickles non-tensor values while it writes the objects
    with pytest.raises(CheckpointException) as failed:
        dcp.save(state, storage_writer=S3StorageWriter(url), no_dist=True)
    assert "this value cannot be saved" in str(the_error(failed.value))
    assert keys(boto_s3, bucket, "broken/") == []  # no .metadata, and the objects already written deleted

    with pytest.raises(CheckpointException) as refused:
        dcp.load(state_dict(1, empty=True), storage_reader=S3StorageReader(url), no_dist=True)
    # torch reads .metadata, then the rank's own __0.metadata (a checkpoint saved without collectives), and
    # reports both failures in an AssertionError of its own.
    message = str(the_error(refused.value))
    for name in (".metadata", "__0.metadata"):
        assert f"GetObject {url}/{name} failed: {url} holds no complete checkpoint" in message, message


# torch's writer threads let the failure escape (S3StorageWriter collects it and raises it from dcp.save).
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_an_upload_failing_mid_save_leaves_no_checkpoint(
    boto_s3, bucket: str, moto_server: MotoServer
) -> None:  # type: ignore[no-untyped-def]
    url = f"s3://{bucket}/dropped"
    with FaultProxy(moto_server.port) as proxy:
        # One of the save's two data objects (thread_count=2) loses its connection, with no retry left.
        proxy.force(Fault.DROP, count=1, eligible=operation_is("PutObject"))
        writer = S3StorageWriter(url, endpoint_url=proxy.endpoint_url, max_retries=0)
        with pytest.raises(CheckpointException) as failed:
            dcp.save(state_dict(1), storage_writer=writer, no_dist=True)
    assert isinstance(the_error(failed.value), S3NetworkError), the_error(failed.value)
    assert proxy.injected[Fault.DROP] == 1
    assert keys(boto_s3, bucket, "dropped/") == []  # the other object: never committed, or deleted


def test_every_object_of_a_save_carries_the_checksum(bucket: str, moto_server: MotoServer) -> None:
    # moto does not verify checksum trailers: the wire shows whether one was sent.
    with FaultProxy(moto_server.port) as proxy:
        writer = S3StorageWriter(f"s3://{bucket}/summed", endpoint_url=proxy.endpoint_url, checksum="crc32c")
        dcp.save(state_dict(1), storage_writer=writer, no_dist=True)
    puts = {record.path.rsplit("/", 1)[1]: record for record in proxy.records if record.method == "PUT"}
    assert ".metadata" in puts and sum(name.endswith(".distcp") for name in puts) == 2, sorted(puts)
    for name, record in puts.items():
        assert record.headers.get("x-amz-trailer") == "x-amz-checksum-crc32c", (name, record.headers)


def test_loading_into_a_tensor_of_another_shape_is_refused_by_torch(bucket: str) -> None:
    url = f"s3://{bucket}/shaped"
    dcp.save({"weight": torch.ones(8, 4)}, storage_writer=S3StorageWriter(url), no_dist=True)
    with pytest.raises(CheckpointException) as refused:
        dcp.load({"weight": torch.zeros(8, 2)}, storage_reader=S3StorageReader(url), no_dist=True)
    error = the_error(refused.value)
    assert isinstance(error, ValueError) and "Size mismatch between saved" in str(error), error


def test_a_checkpoint_url_must_be_an_s3_url_and_a_checksum_one_the_writer_knows() -> None:
    with pytest.raises(ValueError, match="checksum"):
        S3StorageWriter("s3://bucket/checkpoint", checksum="md5")
    for bad in ("/local/checkpoint", "gs://bucket/checkpoint", Path("/tmp/checkpoint")):
        with pytest.raises(InvalidS3UrlError):
            S3StorageWriter(bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidS3UrlError):
            S3StorageReader(bad)  # type: ignore[arg-type]


def test_a_save_without_collectives_writes_the_ranks_own_metadata(boto_s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    url = f"s3://{bucket}/local"
    dcp.save(state_dict(1), storage_writer=S3StorageWriter(url), no_dist=True, use_collectives=False)
    written = keys(boto_s3, bucket, "local/")
    assert "__0.metadata" in written and ".metadata" not in written, written
    target = state_dict(1, empty=True)
    dcp.load(target, storage_reader=S3StorageReader(url), no_dist=True)  # torch falls back to __0.metadata
    assert_holds(target, 1)
