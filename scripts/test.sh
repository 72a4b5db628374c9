#!/usr/bin/env bash
# The test command: installs everything it needs, builds the package, lints, runs every test.
# Usage: scripts/test.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-dev.sh test,lint
scripts/lint.sh
# Run from a folder without the source tree on sys.path, so the installed package (with its compiled
# extension) is what gets imported; tests/ is found through --rootdir.
python -m pytest --rootdir="$PWD" -c "$PWD/pyproject.toml" "$PWD/tests" "$@"
