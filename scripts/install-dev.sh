#!/usr/bin/env bash
# Installs torch (CPU build pinned in constraints.txt), torchdata_s3 built from this checkout (editable), and
# the extras named in $1 (default: test). Safe to run again: the CRT build is cached in build/.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-test}"
torch_spec="${TORCH_SPEC:-torch==2.13.0}"
export PIP_CONSTRAINT="${PIP_CONSTRAINT:-$PWD/constraints.txt}"
export PIP_DISABLE_PIP_VERSION_CHECK=1
python -m pip install --quiet "$torch_spec"
# Editable: the tests and the harness run from this checkout, whose torchdata_s3/ would otherwise shadow an
# installed copy and lack the compiled _core; scikit-build-core's editable finder maps _core to the build.
python -m pip install --quiet -e ".[${extras}]"
