#!/usr/bin/env bash
# Formatting and lint checks for Python (ruff) and C++ (clang-format).
set -euo pipefail
cd "$(dirname "$0")/.."
python -m ruff check .
python -m ruff format --check .
python -m mypy
clang-format --dry-run --Werror csrc/*.h csrc/*.cpp
