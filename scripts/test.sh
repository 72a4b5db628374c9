#!/usr/bin/env bash
# The test command: installs everything it needs (torch, the package and its test extras, nginx with apt),
# builds the package, lints, fuzzes, runs the native tests
# under ASan + UBSan, builds the sdist and the wheels from it and smoke-tests each wheel in a fresh environment
# (scripts/wheels.sh), runs the TLS tests against the cp311 wheel (aws-lc inside), then runs every test
# (docs/development.md, "Sanitizers and fuzzing"), then the tests that concern torchdata 0.11 and no torchdata
# (scripts/torchdata-generations.sh).
# Usage: scripts/test.sh [pytest arguments]   (with arguments: only those tests, no fuzzing, sanitizers or
#        aws-lc build)
# Environment: FUZZ_SECONDS per fuzz target [30]; SANITIZE=0 skips the sanitizer build and its tests;
#              GENERATIONS=0 skips the runs with torchdata 0.11 and without torchdata;
#              WHEELS=0 skips the wheels (the aws-lc TLS tests then build their own aws-lc variant);
#              AWS_LC=0 skips the aws-lc TLS tests; TEST_PROCESSES: processes of the full run and
#              the sanitizer run (scripts/pytest-processes.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-dev.sh test,lint
# nginx (the TLS and benchmark-endpoint tests' server) from Debian, once, before any test process: apt must
# not run under the sanitizers' preloads, nor in two test processes at once.
python -m benchmarks.endpoint.install
scripts/lint.sh
checks_status=0
if (($# == 0)); then
    # A failure here is reported at the end, after the full test run has had its say too.
    bash scripts/fuzz.sh "${FUZZ_SECONDS:-30}" || checks_status=$?
    if [[ "${SANITIZE:-1}" != 0 ]]; then
        bash scripts/sanitize.sh || checks_status=$?
    fi
    aws_lc_wheel=""
    if [[ "${WHEELS:-1}" != 0 ]]; then
        if bash scripts/wheels.sh; then
            aws_lc_wheel=$(ls build/wheels/wheelhouse/torchdata_s3-*-cp311-cp311-*.whl)
        else
            checks_status=$?
        fi
    fi
    if [[ "${AWS_LC:-1}" != 0 ]]; then
        AWS_LC_WHEEL=$aws_lc_wheel bash scripts/aws-lc.sh || checks_status=$?
    fi
fi
# Run from a folder without the source tree on sys.path, so the installed package (with its compiled
# extension) is what gets imported; tests/ is found through --rootdir.
# shellcheck source=scripts/pytest-processes.sh
source scripts/pytest-processes.sh
python -m pytest --rootdir="$PWD" -c "$PWD/pyproject.toml" "${pytest_process_args[@]}" "$PWD/tests" "$@"
if (($# == 0)) && [[ "${GENERATIONS:-1}" != 0 ]]; then
    bash scripts/torchdata-generations.sh
fi
if ((checks_status != 0)); then
    echo "test.sh: fuzzing, the sanitizer run or the aws-lc run failed (exit $checks_status); see above" >&2
    exit "$checks_status"
fi
