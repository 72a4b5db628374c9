"""The write workloads: every client's write adapters put the right bytes on a real endpoint (the embedded
one, started to accept writes), a wrong write fails the content check, and what a measurement wrote is gone
after it. Adapters run in this process (``benchmarks.measure.run``, as the measuring process runs them) to
keep the imports to one; one test goes through the runner's own processes."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from benchmarks import datasets, state_dicts, writes
from benchmarks.cli import build_cases, parse_arguments
from benchmarks.clients import CLIENTS, OURS, load
from benchmarks.endpoint.access_log import AccessLog
from benchmarks.endpoint.nginx import LocalEndpoint, ensure_nginx_installed
from benchmarks.measure import run
from benchmarks.report import summarize, table
from benchmarks.runner import BENCH_ENVIRONMENT, Case, Run, check, run_interleaved
from benchmarks.workloads import HEADLINE, WORKLOADS, WRITES
from tests.s3_server import MotoServer

pytestmark = pytest.mark.integration

MiB = 1024 * 1024
STATE_MIB = 4  # the checkpoint and dcp state dicts: 8 tensors of 512 KiB


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("write-data")
    specs = {
        # Above the 8 MiB multipart threshold of ours and boto3, so that parts go out in parallel.
        "large": datasets.DatasetSpec("large", {"count": 2, "size_bytes": 9 * MiB + 17}),
        "small": datasets.DatasetSpec("small", {"count": 12, "size_bytes": 11_000}),
        "huge": datasets.huge_spec(10),
    }
    return root, {name: datasets.ensure_dataset(root, spec) for name, spec in specs.items()}


@pytest.fixture(scope="module")
def writable_endpoint(data_root: tuple[Path, dict]) -> Iterator[LocalEndpoint]:
    ensure_nginx_installed()
    with LocalEndpoint(data_root[0], "fast", writes=True) as endpoint:
        yield endpoint


@pytest.fixture(autouse=True)
def measurement_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the runner gives each measuring process (e.g. botocore's request checksums off)."""
    for name, value in BENCH_ENVIRONMENT.items():
        if not name.startswith("AWS_ACCESS") and not name.startswith("AWS_SECRET"):
            monkeypatch.setenv(name, value)


def write_cases(root: Path, manifests: dict, endpoint_url: str, external: bool = False) -> dict[str, Case]:
    arguments = argparse.Namespace(
        workloads=",".join(WRITES),
        bucket=datasets.BUCKET,
        data_dir=root,
        endpoint_url=endpoint_url if external else None,
        checkpoint_size_mib=STATE_MIB,
        dcp_size_mib=STATE_MIB,
    )
    cases = {case.workload: case for case in build_cases(arguments, endpoint_url, manifests)}
    for case in cases.values():
        case.context.verify = True
    return cases


def listed_keys(endpoint_url: str, prefix: str) -> list[str]:
    s3 = boto3.client("s3", endpoint_url=endpoint_url, region_name="us-east-1")
    listing = s3.list_objects_v2(Bucket=datasets.BUCKET, Prefix=prefix)
    return [entry["Key"] for entry in listing.get("Contents", [])]


WRITE_ADAPTERS = [
    pytest.param(client, workload, id=f"{client}-{workload}")
    for client in CLIENTS
    for workload in WRITES
    if hasattr(load(client), WORKLOADS[workload].function)
]


@pytest.mark.parametrize(("client", "workload"), WRITE_ADAPTERS)
def test_write_adapter_writes_the_right_bytes(
    client: str, workload: str, writable_endpoint: LocalEndpoint, data_root: tuple[Path, dict]
) -> None:
    case = write_cases(*data_root, writable_endpoint.endpoint_url)[workload]
    result = run(client, workload, case.context)
    check(client, case, result, content=True)  # raises on a wrong count or digest
    assert result["seconds"] > 0 and result["cpu_seconds"] > 0
    if workload in ("checkpoint", "dcp"):
        extra = result["extra"]
        assert extra["save_seconds"] > 0 and extra["load_seconds"] > 0
        assert result["bytes"] == 2 * sum(case.context.sizes)  # saved and loaded
    else:
        assert result["bytes"] == sum(case.context.sizes)
    # What the measurement wrote is gone, from the disk and from the endpoint's listing.
    written = data_root[0] / datasets.BUCKET / case.context.prefix
    assert case.context.prefix.startswith(f"writes/{workload}/{client}-")
    assert not written.exists() and listed_keys(writable_endpoint.endpoint_url, case.context.prefix) == []


def test_fsspec_dcp_writes_the_right_bytes_on_a_server_with_copy_object(data_root: tuple[Path, dict]) -> None:
    server = MotoServer()
    try:
        boto3.client("s3", endpoint_url=server.endpoint_url, region_name="us-east-1").create_bucket(
            Bucket=datasets.BUCKET
        )
        case = write_cases(*data_root, server.endpoint_url, external=True)["dcp"]
        assert case.context.served_dir == ""  # read back and deleted through S3
        result = run("fsspec", "dcp", case.context)
        check("fsspec", case, result, content=True)
        assert listed_keys(server.endpoint_url, case.context.prefix) == []
    finally:
        server.stop()


def test_wrong_or_missing_bytes_fail_the_content_check(
    writable_endpoint: LocalEndpoint, data_root: tuple[Path, dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks.clients import uploads

    case = write_cases(*data_root, writable_endpoint.endpoint_url)["upload-small"]
    honest = uploads.source_objects

    def corrupted(ctx):  # type: ignore[no-untyped-def]
        objects = honest(ctx)
        url, data = objects[3]
        objects[3] = (url, data[:-1] + bytes([data[-1] ^ 1]))
        return objects

    monkeypatch.setattr(uploads, "source_objects", corrupted)
    result = run(OURS, "upload-small", case.context)
    with pytest.raises(RuntimeError, match="digest"):
        check(OURS, case, result, content=True)

    def misnamed(ctx):  # type: ignore[no-untyped-def]
        objects = honest(ctx)
        url, data = objects[0]
        objects[0] = (url + ".renamed", data)
        return objects

    monkeypatch.setattr(uploads, "source_objects", misnamed)
    result = run(OURS, "upload-small", case.context)
    with pytest.raises(RuntimeError, match="digest"):  # the same bytes under another key
        check(OURS, case, result, content=True)


def test_a_checkpoint_that_loads_other_values_fails_the_content_check(
    writable_endpoint: LocalEndpoint, data_root: tuple[Path, dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    import torchdata_s3

    case = write_cases(*data_root, writable_endpoint.endpoint_url)["checkpoint"]

    def load_and_perturb(url: str, **keywords):  # type: ignore[no-untyped-def]
        state = real_load(url, **keywords)
        next(iter(state.values()))[0, 0] += 1.0
        return state

    real_load = torchdata_s3.load
    monkeypatch.setattr(torchdata_s3, "load", load_and_perturb)
    result = run(OURS, "checkpoint", case.context)
    with pytest.raises(RuntimeError, match="digest"):
        check(OURS, case, result, content=True)


def test_write_case_through_the_runner(
    writable_endpoint: LocalEndpoint, data_root: tuple[Path, dict]
) -> None:
    """The runner's own processes: the check run and a round, each on its own prefix, nothing left after."""
    case = write_cases(*data_root, writable_endpoint.endpoint_url)["upload-large"]
    case.context.verify = False
    labels = []
    runs = run_interleaved(
        [case],
        lambda _case: [OURS, "raw-http"],  # the ceiling's uploads are checked like a client's
        1,
        {},
        300,
        lambda label, _run: labels.append(label),
        AccessLog(writable_endpoint.access_log),
    )
    assert case.variant == "2 x 9 MiB"
    assert labels == [
        "upload-large 2 x 9 MiB torchdata_s3 (content check)",
        "upload-large 2 x 9 MiB raw-http (content check)",
        "upload-large 2 x 9 MiB torchdata_s3 round 1/1",
        "upload-large 2 x 9 MiB raw-http round 1/1",
    ]
    for measured in runs:
        assert not measured.error and measured.items == 2 and measured.throughput > 0
        assert measured.requests and measured.requests > 0
    assert not list((data_root[0] / datasets.BUCKET / writes.WRITES_ROOT).rglob("*.bin"))


def test_state_dict_digest_is_what_a_load_of_the_generated_state_computes() -> None:
    names, sizes = state_dicts.layout(STATE_MIB * MiB)
    assert len(names) == state_dicts.TENSORS_MIN and sum(sizes) == STATE_MIB * MiB
    assert state_dicts.layout(1024 * MiB)[1] == [64 * MiB] * 16  # the 16 x 64 MiB
    state = state_dicts.state_dict(names, sizes)
    assert state_dicts.state_digest(state) == state_dicts.expected_digest(STATE_MIB * MiB)
    # A rank's block is its own: two ranks' blocks are not the whole tensor's halves, and differ.
    halves = [state_dicts.make_tensor(0, sizes[0], rank, 2) for rank in range(2)]
    assert halves[0].shape[0] * 2 == state[names[0]].shape[0] and not halves[0].equal(halves[1])


def test_checkpoint_reports_save_and_load_each_against_the_best_peer(data_root: tuple[Path, dict]) -> None:
    case = write_cases(*data_root, "http://unused")["checkpoint"]
    gib = 2**30

    def checkpoint_run(client: str, save_s: float, load_s: float) -> Run:
        extra = {"save_seconds": save_s, "load_seconds": load_s}
        seconds = save_s + load_s
        return Run(client, "checkpoint", case.variant, 0, save_s, seconds, 8, 2 * gib, 0, 0, extra=extra)

    runs = [
        checkpoint_run(OURS, 2.0, 1.0),
        checkpoint_run("boto3-transfer", 5.0, 4.0),
        checkpoint_run("s3torchconnector", 6.0, 3.0),
    ]
    [comparison] = summarize([case], runs, {"profile": "s3like"})["comparisons"]
    assert comparison["unit"] == "s" and comparison["higher_is_better"] is False
    assert comparison["ours_vs_best_peer"] == pytest.approx(2.5)  # save: the best peer's 5 s over ours' 2
    assert comparison["ours_secondary_vs_best_peer"] == pytest.approx(3.0)  # load: 3 s over ours' 1
    assert comparison["ours_vs_secondary"] is None  # save seconds over load seconds: no figure
    rendered = table({"meta": {"profile": "s3like"}, "comparisons": [comparison]})
    assert "ours / best peer: 2.50x" in rendered and "ours / best peer (load s): 3.00x" in rendered


def test_write_workload_sizes_per_preset() -> None:
    default = parse_arguments([])
    assert default.workloads == ",".join(HEADLINE)  # the default run stays the read headline
    full = parse_arguments(["--full"])
    assert set(WRITES) <= set(full.workloads.split(","))
    assert (full.large_count, full.large_size_mib, full.small_count, full.small_size_kb) == (8, 64, 2000, 110)
    assert (full.checkpoint_size_mib, full.dcp_size_mib, full.stream_size_mib) == (1024, 512, 1024)
    quick = parse_arguments(["--quick", "--workloads", ",".join(WRITES)])
    assert quick.checkpoint_size_mib < full.checkpoint_size_mib and quick.dcp_size_mib < full.dcp_size_mib
    assert parse_arguments(["--full", "--dcp-size-mib", "8"]).dcp_size_mib == 8
