#!/usr/bin/env bash
# The package with the other torchdata generations than the main run's 0.9 (issue 20): torchdata 0.11
# (torchdata.nodes and StatefulDataLoader, no DataPipes) and no torchdata at all (torch alone). Each is the
# same installed torchdata_s3 with another torchdata first on PYTHONPATH, so every process, spawned DataLoader
# workers and ParallelMapper processes included, sees it: build/torchdata-0.11 (pip --target, no
# dependencies: torch and requests are already installed), or tests/without_torchdata (a torchdata that fails
# to import, as if absent). Run by scripts/test.sh; on its own: scripts/torchdata-generations.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
TORCHDATA_NODES_VERSION="${TORCHDATA_NODES_VERSION:-0.11.0}"
target="build/torchdata-$TORCHDATA_NODES_VERSION"
if [[ ! -d "$target/torchdata/nodes" ]]; then
    python -m pip install --quiet --disable-pip-version-check --no-deps --target "$target" \
        "torchdata==$TORCHDATA_NODES_VERSION"
fi
# shellcheck source=scripts/pytest-processes.sh
source scripts/pytest-processes.sh
run_pytest() {
    python -m pytest --rootdir="$PWD" -c "$PWD/pyproject.toml" "${pytest_process_args[@]}" "$@"
}
echo "== torchdata $TORCHDATA_NODES_VERSION: nodes, StatefulDataLoader (also under torchrun), datasets"
PYTHONPATH="$PWD/$target${PYTHONPATH:+:$PYTHONPATH}" run_pytest \
    "$PWD/tests/nodes" "$PWD/tests/integration/test_stateful_dataloader.py" \
    "$PWD/tests/integration/test_elastic_resume.py" \
    "$PWD/tests/integration/test_datasets.py" "$PWD/tests/unit/test_torchdata_generations.py"
echo "== without torchdata: datasets and DataPipes on torch alone"
PYTHONPATH="$PWD/tests/without_torchdata${PYTHONPATH:+:$PYTHONPATH}" run_pytest \
    "$PWD/tests/integration/test_datasets.py" "$PWD/tests/integration/test_load.py" \
    "$PWD/tests/integration/test_readers.py" "$PWD/tests/unit/test_torchdata_generations.py"
