#!/usr/bin/env bash
# The soak (issue 25; not part of CI): the DataLoader, writer and checkpoint paths together for the given
# minutes [10] under random faults, throttling and credentials rotating every few seconds, against a
# signature-checking moto on loopback (tests/soak.py says what runs and what it reports). Needs the test
# set-up (scripts/install-dev.sh test). Writes build/soak/report.md, report.json and rss.png; fails if any
# object came back wrong.
# Usage: scripts/soak.sh [minutes]
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-10}"
# Run from the checkout's root (tests/ is imported from here); the installed package is what runs.
python -m tests.soak --minutes "$minutes" --output build/soak
