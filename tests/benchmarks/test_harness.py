"""The benchmark harness itself: every client adapter reads the right bytes, and the results document."""

from __future__ import annotations

import argparse
import io
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks import cli, datasets
from benchmarks.cli import build_cases, parse_arguments
from benchmarks.clients import (
    CLIENTS,
    DATALOADER_CEILING,
    DATALOADER_ROWS,
    DATASET_PEERS,
    LOCAL_FILES,
    OURS,
    WORKLOADS,
    is_peer,
    load,
)
from benchmarks.clients.common import MachineTime, Stopwatch
from benchmarks.endpoint.access_log import AccessLog
from benchmarks.endpoint.nginx import LocalEndpoint, ensure_nginx_installed
from benchmarks.endpoint.process_cpu import cpu_seconds
from benchmarks.plots import plot
from benchmarks.progress import Progress
from benchmarks.report import summarize, table, validate
from benchmarks.runner import Case, Run, check, measure, run_interleaved
from benchmarks.workloads import HEADLINE, OPT_IN
from benchmarks.workloads import WORKLOADS as REGISTRY

pytestmark = pytest.mark.integration


DATA_ROOT: list[Path] = []  # the tiny datasets' directory, for the epochs workload's local-disk ceiling


@pytest.fixture(scope="module")
def tiny_datasets(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("bench-data")
    DATA_ROOT[:] = [root]
    specs = {
        "text": datasets.DatasetSpec("text", {"shards": 3, "lines_per_shard": 400}),
        "large": datasets.DatasetSpec("large", {"count": 2, "size_bytes": 9 * 1024 * 1024 + 17}),
        "small": datasets.DatasetSpec("small", {"count": 12, "size_bytes": 11_000}),
        "list": datasets.DatasetSpec("list", {"count": 2345}),
        "huge": datasets.huge_spec(1),
        "images": datasets.DatasetSpec("images", {**datasets.images_spec(6).parameters, "count": 6}),
        "random": datasets.random_spec(parquet_size_mib=2, zip_size_mib=8),
    }
    return root, {name: datasets.ensure_dataset(root, spec) for name, spec in specs.items()}


@pytest.fixture(scope="module")
def endpoint(tiny_datasets: tuple[Path, dict]) -> Iterator[LocalEndpoint]:
    ensure_nginx_installed()
    with LocalEndpoint(tiny_datasets[0], "fast") as local:
        yield local


def cases_for(workload: str, endpoint_url: str, manifests: dict, verify: bool) -> list[Case]:
    """The harness's own cases for `workload` (one per variant), with small batches and no text workers."""
    arguments = argparse.Namespace(
        workloads=workload,
        bucket=datasets.BUCKET,
        batch_sizes="64",
        num_workers="0",
        epochs=2,
        data_dir=DATA_ROOT[0],
    )
    cases = build_cases(arguments, endpoint_url, manifests)
    for case in cases:
        case.context.verify = verify
    return cases


def case_for(workload: str, endpoint_url: str, manifests: dict, verify: bool) -> Case:
    [case] = cases_for(workload, endpoint_url, manifests, verify)
    return case


# The read workloads; the write workloads' adapters are tested in test_write_workloads.py, the dataset
# clients' (issue 20), load_files_by_s3 in their DataLoader and that DataLoader's ceiling in
# test_dataset_clients.py.
ADAPTER_CASES = [
    (client, workload)
    for client in CLIENTS
    for workload in WORKLOADS
    if not REGISTRY[workload].writes
    and workload not in OPT_IN  # listing-scale's adapters: tests/benchmarks/test_generated_endpoint.py
    and hasattr(load(client), REGISTRY[workload].function)
    and client not in DATASET_PEERS
    and client not in DATASET_PEERS.values()
    and client not in (*DATALOADER_ROWS, DATALOADER_CEILING)
]


@pytest.mark.parametrize(("client", "workload"), ADAPTER_CASES, ids=[f"{c}-{w}" for c, w in ADAPTER_CASES])
def test_adapter_reads_the_right_bytes(
    client: str, workload: str, endpoint: LocalEndpoint, tiny_datasets
) -> None:  # type: ignore[no-untyped-def]
    log = AccessLog(endpoint.access_log)
    for case in cases_for(workload, endpoint.endpoint_url, tiny_datasets[1], verify=True):
        result = measure(client, case, {}, timeout_s=300, access_log=log)
        check(client, case, result, content=True)  # raises on a wrong count or digest
        assert result["seconds"] > 0
        # The whole process's CPU over the timed section; curl's and DataLoader workers' included.
        assert result["cpu_seconds"] > 0
        if client in LOCAL_FILES:  # the references reading the served files never ask the endpoint
            assert result["requests"] == 0
        else:
            assert result["requests"] > 0 and result["fetched_bytes"] > 0
        if client != "raw-http":
            assert result["digest"] == case.expected_digest
        if workload == "gil":
            assert 0 < result["extra"]["pace_percent"] < 1000
        if (
            workload in ("large", "small", "stream") and client not in LOCAL_FILES
        ):  # every byte, at least once
            assert result["fetched_bytes"] >= sum(case.context.sizes)
        if workload == "epochs":
            seconds = result["extra"]["epoch_seconds"]
            assert len(seconds) == 2 and result["seconds"] == seconds[1]
            if client in ("torchdata_s3", "torchdata-on_disk_cache", "fsspec-filecache"):
                # The second epoch came from the cache: the endpoint sent each byte once (ours: plus
                # nothing but the listings; the peers' first epoch may fetch more than once).
                assert result["fetched_bytes"] < 2 * sum(case.context.sizes)


def test_small_objects_report_the_endpoints_cpu_per_request(endpoint: LocalEndpoint, tiny_datasets) -> None:  # type: ignore[no-untyped-def]
    """The figure behind a ceiling argument for small objects: what each request cost nginx, in the same
    window as the client's own CPU per object."""
    case = case_for("small", endpoint.endpoint_url, tiny_datasets[1], verify=False)
    log = AccessLog(endpoint.access_log)
    processes = endpoint.process_ids()
    assert len(processes) >= 2  # nginx's master and its workers (which do the serving)
    result = measure(OURS, case, {}, timeout_s=300, access_log=log, endpoint_processes=processes)
    assert result["requests"] >= len(case.context.keys)
    # A dozen tiny objects may cost nginx under one clock tick (10 ms): the counting itself is tested below.
    assert 0 <= result["endpoint_cpu_seconds"] < result["requests"]
    run = Run(OURS, "small", "", 0, 1.0, 1.0, result["items"], result["bytes"], 0, 0)
    run.cpu_seconds, run.requests = result["cpu_seconds"], result["requests"]
    run.endpoint_cpu_seconds = result["endpoint_cpu_seconds"]
    [comparison] = summarize([case], [run], {"profile": "fast"})["comparisons"]
    row = comparison["clients"][OURS]
    assert row["endpoint_cpu_ms_per_request_median"] == pytest.approx(
        1000 * result["endpoint_cpu_seconds"] / result["requests"]
    )
    assert row["cpu_ms_per_item_median"] == pytest.approx(1000 * result["cpu_seconds"] / result["items"])
    assert "EP ms/req" in table({"meta": {"profile": "fast"}, "comparisons": [comparison]})


def test_the_machines_cpu_is_counted_over_timed_sections_only() -> None:
    """What the cores had and what they used, machine-wide, inside Stopwatches: a spin of this process is in
    both; time outside a Stopwatch is in neither."""
    busy, available = MachineTime.busy_seconds, MachineTime.available_seconds
    time.sleep(0.3)  # untimed
    with Stopwatch() as watch:
        deadline = time.process_time() + 0.3
        while time.process_time() < deadline:
            pass
    used = MachineTime.busy_seconds - busy
    had = MachineTime.available_seconds - available
    assert used >= 0.2  # our own spin, at least (ticks of 10 ms)
    # Every core's time over the section, steal aside (a little under on a VM), nothing from the sleep.
    assert 0.5 * watch.seconds <= had <= (os.cpu_count() or 1) * watch.seconds + 0.05


def test_process_cpu_counts_live_processes_and_skips_gone_ones() -> None:
    start = cpu_seconds([os.getpid()])
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:
        pass
    assert cpu_seconds([os.getpid()]) - start >= 0.2
    assert cpu_seconds([2**22 + 12345]) == 0.0  # above pid_max's default: no such process


def test_a_client_that_cannot_do_a_workload_is_recorded_not_hidden(
    endpoint: LocalEndpoint, tiny_datasets
) -> None:  # type: ignore[no-untyped-def]
    case = case_for("small", endpoint.endpoint_url, tiny_datasets[1], verify=False)
    case.context.keys = [*case.context.keys[:2], "small/no-such-object.bin"]
    seen = []
    runs = run_interleaved([case], lambda _case: ["boto3", OURS], 2, {}, 300, lambda *args: seen.append(args))
    assert [(run.client, bool(run.error)) for run in runs] == [("boto3", True), (OURS, True)]
    assert "NoSuchKey" in runs[0].error or "404" in runs[0].error
    assert [label for label, _run in seen] == [
        "small boto3 (content check)",
        "small torchdata_s3 (content check)",
    ]


def test_rounds_without_a_content_check(endpoint: LocalEndpoint, tiny_datasets) -> None:  # type: ignore[no-untyped-def]
    case = case_for("small", endpoint.endpoint_url, tiny_datasets[1], verify=False)
    labels = []
    runs = run_interleaved(
        [case], lambda _case: ["raw-http"], 1, {}, 300, lambda label, _run: labels.append(label), None, False
    )
    assert labels == ["small raw-http round 1/1"] and not runs[0].error


def test_a_profile_not_in_effect_fails_every_check_attempt(
    endpoint: LocalEndpoint, tiny_datasets, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(cli, "PROFILE_CHECK_PAUSE_S", 0.0)
    key = datasets.ensure_probe(tiny_datasets[0])
    arguments = argparse.Namespace(bucket=datasets.BUCKET, latency_ms=30.0, bandwidth_mbps=90.0)
    stream = io.StringIO()
    with pytest.raises(RuntimeError, match="does not deliver profile s3like"):  # the endpoint is `fast`
        cli.checked_profile(arguments, endpoint.endpoint_url, key, "s3like", Progress(1, stream))
    assert stream.getvalue().count("trying again") == cli.PROFILE_CHECK_ATTEMPTS - 1


def test_check_rejects_wrong_content(tiny_datasets) -> None:  # type: ignore[no-untyped-def]
    case = case_for("small", "http://unused", tiny_datasets[1], verify=True)
    good = {"items": case.expected_items, "digest": case.expected_digest}
    check(OURS, case, good, content=True)
    with pytest.raises(RuntimeError, match="digest"):
        check(OURS, case, {**good, "digest": case.expected_digest + 1}, content=True)
    with pytest.raises(RuntimeError, match="digest"):
        check(OURS, case, {**good, "digest": None}, content=True)  # a verification run must hash
    with pytest.raises(RuntimeError, match="items"):
        check(OURS, case, {**good, "items": case.expected_items - 1}, content=False)


def test_results_document(tmp_path: Path, tiny_datasets) -> None:  # type: ignore[no-untyped-def]
    case = case_for("large", "http://unused", tiny_datasets[1], verify=False)
    gb = 10**9
    runs = [
        Run(
            OURS,
            "large",
            "",
            r,
            t,
            1.0,
            2,
            gb,
            5 * 2**20,
            9 * 2**20,
            cpu_seconds=c,
            fetched_bytes=gb,
            requests=3,
            machine_busy_seconds=busy,
            machine_available_seconds=4.0,
        )
        for r, t, c, busy in [(0, 300.0, 0.5, 1.0), (1, 100.0, 0.7, 3.0), (2, 200.0, 0.6, 2.0)]
    ] + [
        Run("boto3", "large", "", r, t, 1.0, 2, gb, 2**20, 2**20, cpu_seconds=0.4)
        for r, t in enumerate([50.0, 40.0, 60.0])
    ]
    runs.append(Run("raw-http", "large", "", 0, 400.0, 1.0, 2, gb, 0, 0))
    runs.append(Run("s3fs", "large", "", 0, 0.0, 0.0, 0, 0, 0, 0, error="boom"))
    # A variant of ours is reported beside it but is never the best peer.
    runs.append(Run("torchdata_s3-read_chunk", "large", "", 0, 400.0, 1.0, 2, gb, 0, 0))
    runs.append(Run("torchdata_s3-lines", "large", "", 0, 100.0, 1.0, 2, gb, 0, 0))
    # The one-socket floor is faster and cheaper than everything: a reference, never the best peer.
    runs.append(Run("socket-floor", "large", "", 0, 900.0, 1.0, 2, gb, 0, 0, cpu_seconds=0.2))
    runs.append(Run("socket-floor-ahead", "large", "", 0, 800.0, 1.0, 2, gb, 0, 0, cpu_seconds=0.3))
    # The floor of line iteration: a reference for the lines row and for read_chunk.
    runs.append(Run("lines-floor", "large", "", 0, 200.0, 1.0, 2, gb, 0, 0))
    document = summarize([case], runs, {"profile": "fast"})
    validate(document)
    [comparison] = document["comparisons"]
    assert comparison["clients"][OURS]["median"] == 200.0
    assert comparison["clients"]["boto3"]["ratio_to_ours"] == pytest.approx(0.25)
    assert comparison["ours_vs_best_peer"] == pytest.approx(4.0)
    assert comparison["ours_vs_ceiling"] == pytest.approx(0.5)
    assert comparison["clients"][OURS]["cpu_s_per_gb_median"] == pytest.approx(0.6)
    assert comparison["clients"][OURS]["fetched_mib_median"] == pytest.approx(gb / 2**20)
    assert comparison["clients"]["raw-http"]["cpu_s_per_gb_median"] is None  # not measured in that run
    assert comparison["clients"][OURS]["machine_busy_percent_median"] == pytest.approx(50.0)
    assert comparison["clients"][OURS]["machine_cpu_s_per_gb_median"] == pytest.approx(2.0)
    assert comparison["clients"]["boto3"]["machine_busy_percent_median"] is None  # not measured
    assert comparison["ours_cpu_per_gb_vs_lowest_peer"] == pytest.approx(0.6 / 0.4)
    assert comparison["ours_cpu_per_gb_vs_floor"] == pytest.approx(0.6 / 0.2)
    assert comparison["ours_cpu_per_gb_vs_floor_ahead"] == pytest.approx(0.6 / 0.3)
    assert comparison["reads_vs_read_chunk"] == {OURS: 0.5, "torchdata_s3-lines": 0.25, "lines-floor": 0.5}
    assert comparison["lines_vs_floor"] == {"torchdata_s3-lines": 0.5}
    assert (
        comparison["clients"]["s3fs"]["failed_runs"] == 1 and comparison["clients"]["s3fs"]["median"] is None
    )
    rendered = table(document)
    assert "ours / best peer: 4.00x" in rendered and "1 failed: boom" in rendered
    assert "busy %" in rendered and "all s/GB" in rendered
    assert "ours' CPU per GB / lowest peer's: 1.50x" in rendered
    assert "ours' CPU per GB / socket-floor's: 3.00x" in rendered
    assert "ours' CPU per GB / socket-floor-ahead's: 2.00x" in rendered
    assert "torchdata_s3-lines / torchdata_s3-read_chunk: 0.25x" in rendered
    assert "torchdata_s3-lines / lines-floor: 0.50x" in rendered
    [image] = plot(document, tmp_path)
    assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    broken = {**document, "schema_version": 0}
    with pytest.raises(ValueError, match="schema_version"):
        validate(broken)


def test_every_client_named_after_ours_is_a_variant_never_a_peer() -> None:
    ours = [name for name in CLIENTS if name.startswith(OURS + "-")]
    # torchdata_s3-tuned was once left off the list of variants and counted as the best peer.
    assert "torchdata_s3-tuned" in ours and "torchdata_s3-read_chunk" in ours
    assert not any(is_peer(name) for name in [OURS, *ours])
    assert is_peer("boto3") and is_peer("obstore") and not is_peer("socket-floor")


def test_lower_is_better_workloads_compare_the_other_way(tiny_datasets) -> None:  # type: ignore[no-untyped-def]
    [parquet, _zip] = cases_for("random", "http://unused", tiny_datasets[1], verify=False)
    runs = [
        Run(OURS, "random", parquet.variant, 0, 0.5, 0.5, 1, 10, 0, 0),
        Run("s3fs", "random", parquet.variant, 0, 2.0, 2.0, 1, 10, 0, 0),
        Run("s3torchconnector", "random", parquet.variant, 0, 1.0, 1.0, 1, 10, 0, 0),
    ]
    [comparison] = summarize([parquet], runs, {"profile": "fast"})["comparisons"]
    assert comparison["unit"] == "s" and comparison["higher_is_better"] is False
    assert comparison["ours_vs_best_peer"] == pytest.approx(2.0)  # the best peer's 1.0 s over ours' 0.5 s


def test_epochs_report_later_epochs_first_epoch_and_the_local_disk_ceiling(tiny_datasets) -> None:  # type: ignore[no-untyped-def]
    small, _large = cases_for("epochs", "http://unused", tiny_datasets[1], verify=False)
    mb = 10**6

    def run(client: str, first_s: float, later_s: float) -> Run:
        extra = {"epoch_seconds": [first_s, later_s]}
        return Run(client, "epochs", small.variant, 0, mb / 1e6 / later_s, later_s, 1, mb, 0, 0, extra=extra)

    runs = [
        run(OURS, 1.0, 0.1),  # epoch 1: 1 MB/s; later: 10 MB/s
        run("torchdata_s3-nocache", 0.8, 0.8),
        run("fsspec-filecache", 2.0, 0.05),
        run("local-disk", 0.08, 0.08),
    ]
    [comparison] = summarize([small], runs, {"profile": "s3like"})["comparisons"]
    assert comparison["clients"][OURS]["median"] == pytest.approx(10.0)
    assert comparison["clients"][OURS]["secondary_median"] == pytest.approx(1.0)
    assert comparison["ours_vs_secondary"] == pytest.approx(10.0)  # later epochs over the first
    assert comparison["ours_secondary_vs_variants"] == {"torchdata_s3-nocache": pytest.approx(0.8)}
    assert comparison["ceiling"] == "local-disk" and comparison["ours_vs_ceiling"] == pytest.approx(0.8)
    assert comparison["ours_vs_best_peer"] == pytest.approx(0.5)  # neither ours' variant nor the ceiling
    rendered = table({"meta": {"profile": "s3like"}, "comparisons": [comparison]})
    assert "ours / local-disk ceiling: 80%" in rendered and "its own epoch 1: 10.0x" in rendered


def test_access_log_counts_a_window(tmp_path: Path) -> None:
    log_path = tmp_path / "access.log"
    log_path.write_text("200 100\n")
    log = AccessLog(log_path)
    start = log.offset()
    with open(log_path, "a") as appending:
        appending.write("206 8388608\n404 0\n")
    served = log.since(start)
    assert (served.requests, served.body_bytes) == (2, 8388608)


def test_the_default_run_is_the_headline_and_full_is_everything() -> None:
    default = parse_arguments([])
    assert default.workloads == ",".join(HEADLINE) and default.profile == "both"
    full = parse_arguments(["--full"])
    everything = [workload for workload in WORKLOADS if workload not in OPT_IN]  # listing-scale: by name
    assert full.workloads == ",".join(everything) and full.large_count > default.large_count
    assert parse_arguments(["--full", "--small-count", "7"]).small_count == 7  # an option beats its preset
    assert (default.content_check, full.content_check) == ("first", "every")
    with pytest.raises(SystemExit):
        parse_arguments(["--workloads", "large,nonsense"])


def test_progress_says_which_measurement_of_how_many() -> None:
    stream = io.StringIO()
    progress = Progress(3, stream)
    progress.measured("fast", "large torchdata_s3 (content check)", None, "MB/s")
    progress.measured(
        "fast", "large torchdata_s3 round 1/2", Run(OURS, "large", "", 0, 1234.5, 1, 1, 1, 0, 0), "MB/s"
    )
    failed = Run(
        OURS, "random", "", 0, 0.0, 0, 0, 0, 0, 0, error="Traceback...\nio.UnsupportedOperation: seek"
    )
    progress.measured("s3like", "random torchdata_s3 (content check)", failed, "s")
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("[1/3 0:00] fast large torchdata_s3 (content check): content ok")
    assert lines[1].endswith("round 1/2: 1,234 MB/s")
    assert lines[2].endswith("FAILED: io.UnsupportedOperation: seek")
