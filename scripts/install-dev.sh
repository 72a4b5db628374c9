#!/usr/bin/env bash
# Installs torch (CPU build pinned in constraints.txt), torchdata_s3 built from this checkout, and the
# extras named in $1 (default: test). Safe to run again: the CRT build is cached in build/.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-test}"
torch_spec="${TORCH_SPEC:-torch==2.13.0}"
export PIP_CONSTRAINT="${PIP_CONSTRAINT:-$PWD/constraints.txt}"
export PIP_DISABLE_PIP_VERSION_CHECK=1
python -m pip install --quiet "$torch_spec"
python -m pip install --quiet ".[${extras}]"
