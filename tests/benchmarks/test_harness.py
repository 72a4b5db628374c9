"""The benchmark harness itself: every client adapter reads the right bytes, and the results document."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks import datasets
from benchmarks.cli import DATASET_OF, UNITS
from benchmarks.clients import CLIENTS, OURS, WORKLOADS, load
from benchmarks.clients.common import Context
from benchmarks.endpoint.nginx import LocalEndpoint, ensure_nginx_installed
from benchmarks.plots import plot
from benchmarks.report import summarize, table, validate
from benchmarks.runner import Case, Run, check, measure

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tiny_datasets(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("bench-data")
    specs = {
        "text": datasets.DatasetSpec("text", {"shards": 3, "lines_per_shard": 400}),
        "large": datasets.DatasetSpec("large", {"count": 2, "size_bytes": 9 * 1024 * 1024 + 17}),
        "small": datasets.DatasetSpec("small", {"count": 12, "size_bytes": 11_000}),
        "list": datasets.DatasetSpec("list", {"count": 2345}),
        "huge": datasets.huge_spec(1),
    }
    return root, {name: datasets.ensure_dataset(root, spec) for name, spec in specs.items()}


@pytest.fixture(scope="module")
def endpoint(tiny_datasets: tuple[Path, dict]) -> Iterator[str]:
    ensure_nginx_installed()
    with LocalEndpoint(tiny_datasets[0], "fast") as local:
        yield local.endpoint_url


def case_for(workload: str, endpoint_url: str, manifests: dict, verify: bool) -> Case:
    manifest = manifests[DATASET_OF[workload]]
    context = Context(
        endpoint_url=endpoint_url,
        bucket=datasets.BUCKET,
        prefix=f"{manifest.spec_name}/",
        keys=manifest.keys,
        sizes=manifest.sizes,
        verify=verify,
        batch_size=64,
        num_workers=0,
    )
    items = manifest.lines if workload == "text" else len(manifest.keys)
    return Case(workload, "", context, items, manifest.digest, UNITS[workload])


ADAPTER_CASES = [
    (client, workload) for client in CLIENTS for workload in WORKLOADS if hasattr(load(client), workload)
]


@pytest.mark.parametrize(("client", "workload"), ADAPTER_CASES, ids=[f"{c}-{w}" for c, w in ADAPTER_CASES])
def test_adapter_reads_the_right_bytes(client: str, workload: str, endpoint: str, tiny_datasets) -> None:  # type: ignore[no-untyped-def]
    case = case_for(workload, endpoint, tiny_datasets[1], verify=True)
    result = measure(client, case, {}, timeout_s=300)
    check(client, case, result, content=True)  # raises on a wrong count or digest
    assert result["seconds"] > 0
    if client != "raw-http":
        assert result["digest"] == case.expected_digest
    if workload == "gil":
        assert 0 < result["extra"]["pace_percent"] < 1000


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
    runs = [
        Run(OURS, "large", "", r, t, 1.0, 2, 10, 5 * 2**20, 9 * 2**20)
        for r, t in enumerate([300.0, 100.0, 200.0])
    ] + [Run("boto3", "large", "", r, t, 1.0, 2, 10, 2**20, 2**20) for r, t in enumerate([50.0, 40.0, 60.0])]
    runs.append(Run("raw-http", "large", "", 0, 400.0, 1.0, 2, 10, 0, 0))
    runs.append(Run("s3fs", "large", "", 0, 0.0, 0.0, 0, 0, 0, 0, error="boom"))
    document = summarize([case], runs, {"profile": "fast"})
    validate(document)
    [comparison] = document["comparisons"]
    assert comparison["clients"][OURS]["median"] == 200.0
    assert comparison["clients"]["boto3"]["ratio_to_ours"] == pytest.approx(0.25)
    assert comparison["ours_vs_best_peer"] == pytest.approx(4.0)
    assert comparison["ours_vs_ceiling"] == pytest.approx(0.5)
    assert (
        comparison["clients"]["s3fs"]["failed_runs"] == 1 and comparison["clients"]["s3fs"]["median"] is None
    )
    rendered = table(document)
    assert "ours / best peer: 4.00x" in rendered and "1 failed: boom" in rendered
    [image] = plot(document, tmp_path)
    assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    broken = {**document, "schema_version": 0}
    with pytest.raises(ValueError, match="schema_version"):
        validate(broken)
