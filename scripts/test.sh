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
# Each step's start, so that a CI log says where the time went (docs/development.md, "CI"), and how busy the
# machine's cores were during the step before (/proc/stat, every process): a step well below 100% waits on
# something other than the CPU (a server, a timeout, one core's compile), which running another step beside
# it could use; one near 100% can only get faster by doing less.
busy_ticks=0
all_ticks=0
step() {
    local user nice system idle iowait irq softirq steal busy all before=""
    read -r _ user nice system idle iowait irq softirq steal _ </proc/stat
    busy=$((user + nice + system + irq + softirq + steal))
    all=$((busy + idle + iowait))
    if ((all_ticks > 0 && all - all_ticks >= 200)); then  # at least a second of both cores' ticks (USER_HZ 100)
        before=" (the step before: machine $((100 * (busy - busy_ticks) / (all - all_ticks)))% busy)"
    fi
    busy_ticks=$busy
    all_ticks=$all
    echo "test.sh: [$((SECONDS / 60)) min $((SECONDS % 60)) s] $*$before"
}
toolchain_pid=""
if (($# == 0)) && [[ "${WHEELS:-1}" != 0 ]]; then
    # zig compiles its own libraries on first use, on one core (3 minutes): meanwhile, the installs, nginx,
    # lint and fuzzing go on.
    step "zig for the wheels, in the background (build/wheels-toolchain.log)"
    mkdir -p build
    bash scripts/wheels.sh --toolchain >build/wheels-toolchain.log 2>&1 &
    toolchain_pid=$!
fi
step "installs: torch, the package (editable build), the test extras"
scripts/install-dev.sh test,lint
# nginx (the TLS and benchmark-endpoint tests' server) from Debian, once, before any test process: apt must
# not run under the sanitizers' preloads, nor in two test processes at once.
step "nginx"
python -m benchmarks.endpoint.install
step "lint"
scripts/lint.sh
checks_status=0
failed_checks=()
mkdir -p build/checks
check_failed() {  # check_failed NAME STATUS
    checks_status=$2
    failed_checks+=("$1")
}
# check NAME COMMAND...: runs a check whose failure is reported at the end, after the full test run has had its
# say too, with the last lines of its output again (build/checks/NAME.log): CI shows only the end of the log.
check() {
    local name=$1 status=0
    shift
    "$@" 2>&1 | tee "build/checks/$name.log" || status=$?
    ((status == 0)) || check_failed "$name" "$status"
    return "$status"
}
report_failed_checks() {
    local name
    for name in "${failed_checks[@]}"; do
        echo "test.sh: FAILED: $name; the end of its output (build/checks/$name.log):" >&2
        tail -n 80 "build/checks/$name.log" >&2
    done
}
aws_lc_wheel=""
wheels_pid=""
if (($# == 0)); then
    step "fuzzing"
    check fuzzing bash scripts/fuzz.sh "${FUZZ_SECONDS:-30}" || true
    if [[ "${SANITIZE:-1}" != 0 ]]; then
        step "the sanitizer build and its tests"
        check sanitizer bash scripts/sanitize.sh || true
    fi
    if [[ "${WHEELS:-1}" != 0 ]]; then
        step "the sdist and the cp311 wheel from it"
        if ! wait "$toolchain_pid"; then
            cat build/wheels-toolchain.log >&2
            echo "test.sh: zig did not install or compile; see above" >&2
        fi
        if check wheel-cp311 env SMOKE=0 bash scripts/wheels.sh 3.11; then
            aws_lc_wheel=$(ls build/wheels/wheelhouse/torchdata_s3-*-cp311-cp311-*.whl)
        fi
    fi
    if [[ "${AWS_LC:-1}" != 0 ]]; then
        step "the TLS tests against aws-lc"
        check aws-lc env AWS_LC_WHEEL="$aws_lc_wheel" bash scripts/aws-lc.sh || true
    fi
    if [[ -n "$aws_lc_wheel" ]]; then
        # The other Pythons' wheels (the CRT is built: each compiles 4 files and links) and every wheel's smoke
        # test, beside the full run, which leaves a third of a core idle: at the lowest priority, so that the
        # tests keep their pace (docs/development.md, "CI").
        step "the other wheels and the smoke tests, in the background (build/wheels-rest.log)"
        nice -n 19 bash scripts/wheels.sh --continue 3.9 3.10 3.12 3.13 >build/wheels-rest.log 2>&1 &
        wheels_pid=$!
    fi
fi
# From the repository root: the editable install's finder maps torchdata_s3 to this checkout and its compiled
# _core to the build, so the tree on sys.path imports the same package.
# shellcheck source=scripts/pytest-processes.sh
source scripts/pytest-processes.sh
# With arguments, only what they name (tests/ was passed beside them, so naming a file still ran them all);
# with options alone, pytest's testpaths (tests/).
selection=("$@")
((${#selection[@]})) || selection=("$PWD/tests")
step "every test"
# A failure here ends the run, after naming any check that failed before it.
trap report_failed_checks EXIT
python -m pytest --rootdir="$PWD" -c "$PWD/pyproject.toml" "${pytest_process_args[@]}" "${selection[@]}"
if (($# == 0)) && [[ "${GENERATIONS:-1}" != 0 ]]; then
    # Beside the last wheels and their smoke tests, which wait on pip and servers for much of their time.
    step "torchdata 0.11, then no torchdata"
    bash scripts/torchdata-generations.sh
fi
if [[ -n "$wheels_pid" ]]; then
    step "waiting for the other wheels and the smoke tests"
    wait "$wheels_pid" || check_failed other-wheels $?
    grep -v -e '^WARNING' -e '^INFO' build/wheels-rest.log | tee build/checks/other-wheels.log
fi
step "done"
if ((checks_status != 0)); then
    echo "test.sh: failed: ${failed_checks[*]} (exit $checks_status); the end of each one's output follows" >&2
    exit "$checks_status"  # the EXIT trap prints them
fi
