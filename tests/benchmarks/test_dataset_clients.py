"""Issue 20's dataset clients: each reads the dataset's exact bytes through its entry point and loader, the
map-style ones a shuffled batch at a time, and the nodes client in a process of its own with torchdata 0.11
ahead on its path. (test_harness.py checks every other adapter; these are checked here, most in this
process, where their DataLoader workers fork in a fraction of a second instead of a fresh interpreter
importing torch per case.)"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from benchmarks import datasets
from benchmarks.clients import (
    CLIENTS,
    DATALOADER_CEILING,
    DATASET_PEERS,
    LOADER_IN_DATALOADER,
    OURS,
    PYTHONPATH,
    TORCHDATA_NODES_PATH,
    dataloader_ceiling,
    dataset_loaders,
    ensure_paths,
    is_peer,
    load,
    ours_dataloader,
    ours_iterable,
    ours_map,
    python_path,
)
from benchmarks.clients.common import Context
from benchmarks.clients.dataset_loaders import MAP_BATCH_SIZE
from benchmarks.endpoint.access_log import AccessLog
from benchmarks.endpoint.nginx import LocalEndpoint, ensure_nginx_installed
from benchmarks.measure import run
from benchmarks.report import summarize, table
from benchmarks.runner import REPO, Case, Run, check, measure

pytestmark = pytest.mark.integration

DATASET_CLIENTS = [name for name in CLIENTS if name in DATASET_PEERS or name in DATASET_PEERS.values()]
IN_PROCESS = [name for name in DATASET_CLIENTS if name not in PYTHONPATH]
WORKLOADS = ("small", "images")


@pytest.fixture(scope="module")
def manifests(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("bench-data")
    specs = {
        "small": datasets.DatasetSpec("small", {"count": 12, "size_bytes": 11_000}),
        "images": datasets.DatasetSpec("images", {**datasets.images_spec(6).parameters, "count": 6}),
    }
    return root, {name: datasets.ensure_dataset(root, spec) for name, spec in specs.items()}


@pytest.fixture(scope="module")
def endpoint(manifests: tuple[Path, dict]) -> Iterator[LocalEndpoint]:
    ensure_nginx_installed()
    with LocalEndpoint(manifests[0], "fast") as local:
        yield local


def verified_case(workload: str, endpoint: LocalEndpoint, manifests: tuple[Path, dict]) -> Case:
    manifest = manifests[1][workload]
    context = Context(
        endpoint.endpoint_url,
        datasets.BUCKET,
        f"{manifest.spec_name}/",
        manifest.keys,
        verify=True,
        sizes=manifest.sizes,
        num_workers=2 if workload == "images" else 0,  # as benchmarks.cli builds the cases
    )
    return Case(workload, "", context, len(manifest.keys), manifest.digest, "items/s")


def test_the_dataloader_rows_are_registered() -> None:
    assert CLIENTS[LOADER_IN_DATALOADER] == "ours_dataloader" and CLIENTS[DATALOADER_CEILING]
    assert all(hasattr(load(LOADER_IN_DATALOADER), workload) for workload in WORKLOADS)
    assert hasattr(load(DATALOADER_CEILING), "small") and not hasattr(load(DATALOADER_CEILING), "images")
    assert not is_peer(LOADER_IN_DATALOADER) and not is_peer(DATALOADER_CEILING)


def test_the_dataset_clients_are_registered_with_both_workloads() -> None:
    assert set(DATASET_CLIENTS) == {
        "torchdata_s3-iterable",
        "torchdata_s3-map",
        "torchdata_s3-nodes",
        "s3torchconnector-iterable",
        "s3torchconnector-map",
    }
    for name in DATASET_CLIENTS:  # importable by the harness (torchdata 0.9) to see what each does
        assert all(hasattr(load(name), workload) for workload in WORKLOADS), name


@pytest.mark.parametrize("workload", WORKLOADS)
@pytest.mark.parametrize("client", IN_PROCESS)
def test_dataset_client_reads_the_right_bytes(
    client: str, workload: str, endpoint: LocalEndpoint, manifests: tuple[Path, dict]
) -> None:
    case = verified_case(workload, endpoint, manifests)
    log = AccessLog(endpoint.access_log)
    start = log.offset()
    result = run(client, workload, case.context)
    check(client, case, result, content=True)  # every object once, the dataset's digest
    served = log.since(start)
    assert served.requests > len(case.context.keys)  # each object's GET, and the listing
    assert served.body_bytes >= sum(case.context.sizes)
    assert result["seconds"] > 0 and result["cpu_seconds"] > 0  # the workers' CPU included once joined


@pytest.mark.parametrize("workload", WORKLOADS)
def test_nodes_client_runs_on_torchdata_0_11_in_its_own_process(
    workload: str, endpoint: LocalEndpoint, manifests: tuple[Path, dict]
) -> None:
    ensure_paths(["torchdata_s3-nodes"], REPO)  # present here; what a fresh machine's harness run does
    case = verified_case(workload, endpoint, manifests)
    result = measure("torchdata_s3-nodes", case, {}, timeout_s=120, access_log=AccessLog(endpoint.access_log))
    check("torchdata_s3-nodes", case, result, content=True)
    major, minor = (int(part) for part in result["extra"]["torchdata"].split(".")[:2])
    assert (major, minor) >= (0, 10)  # the harness itself runs torchdata 0.9
    assert result["fetched_bytes"] >= sum(case.context.sizes) and result["cpu_seconds"] > 0


def test_the_map_client_hands_the_dataset_shuffled_batches(
    endpoint: LocalEndpoint, manifests: tuple[Path, dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    case = verified_case("small", endpoint, manifests)
    objects = ours_map.dataset(case.context, "small")
    batches: list[list[int]] = []
    fetch_batch = type(objects).__getitems__

    def recording(self, indices):  # type: ignore[no-untyped-def]
        batches.append(list(indices))
        return fetch_batch(self, indices)

    monkeypatch.setattr(type(objects), "__getitems__", recording)
    monkeypatch.setattr(dataset_loaders, "WORKERS", 0)  # in this process, so that the calls can be seen
    torch.manual_seed(1)
    items = [item for batch in ours_map.make_loader(objects) for item in batch]
    count = len(case.context.keys)
    assert len(items) == count and all(isinstance(item, bytes) for item in items)
    assert [len(batch) for batch in batches] == [min(MAP_BATCH_SIZE, count)]  # one call per batch
    assert sorted(batches[0]) == list(range(count)) and batches[0] != list(range(count))


def test_only_the_nodes_client_gets_torchdata_0_11_on_its_path() -> None:
    assert python_path("torchdata_s3-nodes", REPO) == [str(REPO / TORCHDATA_NODES_PATH)]
    assert all(python_path(name, REPO) == [] for name in CLIENTS if name != "torchdata_s3-nodes")


def test_ensure_paths_installs_a_missing_directory_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    commands: list[list[str]] = []
    succeed = [True]

    def pip(command, check):  # type: ignore[no-untyped-def]
        commands.append(command)
        target = Path(command[command.index("--target") + 1])
        (target / "torchdata").mkdir(parents=True)
        return subprocess.CompletedProcess(command, 0 if succeed[0] else 1)

    monkeypatch.setattr(subprocess, "run", pip)
    succeed[0] = False  # no network: a warning, no directory, the harness goes on
    ensure_paths(["torchdata_s3-nodes", OURS], tmp_path)
    assert not (tmp_path / TORCHDATA_NODES_PATH).exists()
    assert not list((tmp_path / TORCHDATA_NODES_PATH).parent.iterdir())  # no partial install left
    assert "could not install torchdata==0.11.0" in capsys.readouterr().err
    succeed[0] = True
    ensure_paths(["torchdata_s3-nodes"], tmp_path)
    assert (tmp_path / TORCHDATA_NODES_PATH / "torchdata").is_dir()
    assert commands[-1][-1] == "torchdata==0.11.0" and "--no-deps" in commands[-1]
    ensure_paths(["torchdata_s3-nodes", OURS], tmp_path)  # present: pip is not run again
    ensure_paths([OURS, "s3torchconnector"], tmp_path / "elsewhere")  # nothing needed: nothing run
    assert len(commands) == 2


def test_each_dataset_variant_is_compared_with_its_peer() -> None:
    case = Case("small", "", Context("http://unused", "b", "small/", ["k"]), 1, 0, "objects/s")
    figures = {
        OURS: 1000.0,
        "torchdata_s3-map": 950.0,
        "s3torchconnector-map": 50.0,
        "torchdata_s3-iterable": 900.0,
        "s3torchconnector": 400.0,
    }
    runs = [Run(client, "small", "", 0, figure, 1.0, 1, 10**6, 0, 0) for client, figure in figures.items()]
    [comparison] = summarize([case], runs, {"profile": "s3like"})["comparisons"]
    # Only pairs that both ran; the variants are never the best peer.
    assert comparison["variants_vs_their_peers"] == {"torchdata_s3-map": pytest.approx(19.0)}
    assert comparison["ours_vs_best_peer"] == pytest.approx(2.5)
    assert comparison["clients"]["torchdata_s3-map"]["ratio_to_ours"] == pytest.approx(0.95)
    rendered = table({"meta": {}, "comparisons": [comparison]})
    assert "torchdata_s3-map / s3torchconnector-map: 19.00x" in rendered


@pytest.mark.parametrize("workload", WORKLOADS)
def test_load_files_by_s3_in_the_dataloader_reads_the_right_bytes(
    workload: str, endpoint: LocalEndpoint, manifests: tuple[Path, dict]
) -> None:
    case = verified_case(workload, endpoint, manifests)
    log = AccessLog(endpoint.access_log)
    start = log.offset()
    result = run(LOADER_IN_DATALOADER, workload, case.context)
    check(LOADER_IN_DATALOADER, case, result, content=True)  # every object once, the dataset's digest
    served = log.since(start)
    assert served.requests >= len(case.context.keys)  # the URLs are given: no listing
    assert served.body_bytes >= sum(case.context.sizes)
    assert result["seconds"] > 0 and result["cpu_seconds"] > 0


def test_the_dataloader_rows_share_the_iterable_doors_loader(
    endpoint: LocalEndpoint, manifests: tuple[Path, dict]
) -> None:
    """Same batch_size, collate, workers and start method as torchdata_s3-iterable's DataLoader."""
    context = verified_case("small", endpoint, manifests).context
    loaders = [
        ours_iterable.make_loader(ours_iterable.dataset(context, "small")),
        ours_dataloader.make_loader(context, "small", ours_dataloader._config(context)),
        dataloader_ceiling.make_loader(context),
    ]

    def settings(loader: torch.utils.data.DataLoader) -> tuple:
        return (
            loader.batch_size,
            loader.num_workers,
            loader.collate_fn,
            loader.multiprocessing_context,
            loader.pin_memory,
            loader.prefetch_factor,
            loader.persistent_workers,
        )

    assert settings(loaders[1]) == settings(loaders[0]) == settings(loaders[2])
    assert loaders[0].num_workers == 2 and loaders[0].batch_size is None


def test_the_dataloader_ceiling_moves_the_datasets_sizes_without_s3(
    endpoint: LocalEndpoint, manifests: tuple[Path, dict]
) -> None:
    case = verified_case("small", endpoint, manifests)
    sizes = [*case.context.sizes[:-1], case.context.sizes[-1] - 5]  # not all equal: each size its own
    case.context.sizes = sizes
    log = AccessLog(endpoint.access_log)
    start = log.offset()
    result = run(DATALOADER_CEILING, "small", case.context)
    assert log.since(start).requests == 0  # no S3, no network
    check(DATALOADER_CEILING, case, result, content=True)  # the count and the bytes; it has no content
    assert result["items"] == len(sizes) and result["bytes"] == sum(sizes)
    assert result["digest"] != case.expected_digest  # in-memory bytes, not the dataset's
    with pytest.raises(RuntimeError, match="moved"):
        check(DATALOADER_CEILING, case, {**result, "bytes": result["bytes"] - 1}, content=False)
    # Each worker takes every second object (as the iterable dataset deals them), each a new bytes object.
    objects = dataloader_ceiling.InMemoryObjects(sizes)
    blobs = list(objects)
    assert [len(blob) for blob in blobs] == sizes and len({id(blob) for blob in blobs}) == len(blobs)


def test_the_doors_are_compared_with_load_files_by_s3_in_their_dataloader_and_its_ceiling() -> None:
    case = Case("small", "", Context("http://unused", "b", "small/", ["k"]), 1, 0, "objects/s")
    figures = {
        OURS: 4000.0,
        LOADER_IN_DATALOADER: 1000.0,
        "torchdata_s3-iterable": 950.0,
        "torchdata_s3-map": 800.0,
        "torchdata_s3-nodes": 2000.0,
        "s3torchconnector-iterable": 500.0,
        DATALOADER_CEILING: 1250.0,
    }
    runs = [Run(client, "small", "", 0, figure, 1.0, 1, 10**6, 0, 0) for client, figure in figures.items()]
    [comparison] = summarize([case], runs, {"profile": "fast"})["comparisons"]
    assert comparison["doors_vs_loader_in_dataloader"] == {
        "torchdata_s3-iterable": pytest.approx(0.95),
        "torchdata_s3-map": pytest.approx(0.8),
        "torchdata_s3-nodes": pytest.approx(2.0),
    }
    assert comparison["vs_dataloader_ceiling"] == {  # the rows that end in the 2-worker DataLoader
        LOADER_IN_DATALOADER: pytest.approx(0.8),
        "torchdata_s3-iterable": pytest.approx(0.76),
        "torchdata_s3-map": pytest.approx(0.64),
        "s3torchconnector-iterable": pytest.approx(0.4),
    }
    # The headline's ratios stay; neither new row is a peer (the best peer is s3torchconnector-iterable).
    assert comparison["clients"]["torchdata_s3-iterable"]["ratio_to_ours"] == pytest.approx(0.2375)
    assert comparison["ours_vs_best_peer"] == pytest.approx(8.0)
    rendered = table({"meta": {}, "comparisons": [comparison]})
    assert "torchdata_s3-iterable / torchdata_s3-dataloader: 0.95x" in rendered
    assert "torchdata_s3-dataloader / dataloader-ceiling: 80%" in rendered
    assert "ours / raw-http ceiling" not in rendered  # raw-http did not run
