#!/usr/bin/env bash
# Fuzzes the s3:// URL handling and the native ListObjectsV2 parser with atheris, each for a bounded time.
# Usage: scripts/fuzz.sh [seconds per target, default 30]
#
# Starts from the committed corpus (tests/fuzz/corpus/<target>/, also replayed by every pytest run through
# tests/fuzz/test_corpus.py). New inputs go to build/fuzz/<target>/corpus, where scripts/sanitize.sh replays
# them under ASan + UBSan. A failing input is written to build/fuzz/<target>/crash-*: commit it into
# tests/fuzz/corpus/<target>/ together with the fix. Expects the test install (scripts/install-dev.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"
mkdir -p build/fuzz
# One target per core: atheris runs on one.
fuzz_target() {
    local target=$1 log="build/fuzz/$1.log" started=$SECONDS runs found
    # atheris lists every module it instruments and every new input: keep that in the log file.
    if ! python -m tests.fuzz.run "$target" --seconds "$seconds" --work-dir build/fuzz >"$log" 2>&1; then
        grep -v -e '^INFO: Instrumenting' -e '^#[0-9]' "$log" | tail -n 40 >&2
        echo "fuzz: $target failed after $((SECONDS - started)) s; log: $log" >&2
        return 1
    fi
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    found=$(find "build/fuzz/$target/corpus" -type f | wc -l)
    echo "fuzz: $target: ${runs:-?} inputs in $((SECONDS - started)) s, no property failed ($found inputs kept)"
}
pids=()
for target in s3_url list_objects_v2; do
    fuzz_target "$target" &
    pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
exit "$status"
