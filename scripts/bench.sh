#!/usr/bin/env bash
# The benchmark command: installs torch (CPU, pinned), this package and the peers we compare against,
# then runs the harness on an embedded local S3 endpoint (nginx, installed with apt if missing).
# Usage: scripts/bench.sh [harness options]   none: the short first run (headline workloads, both profiles);
# e.g. --full (every workload, full size), --quick, --profile s3like, --endpoint-url URL --upload
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-dev.sh bench
exec python -m benchmarks "$@"
