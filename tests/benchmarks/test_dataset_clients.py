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
    DATASET_PEERS,
    OURS,
    PYTHONPATH,
    TORCHDATA_NODES_PATH,
    ensure_paths,
    load,
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
    monkeypatch.setattr(ours_map, "WORKERS", 0)  # in this process, so that the calls can be seen
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
