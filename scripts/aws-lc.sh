#!/usr/bin/env bash
# Builds torchdata_s3 with TORCHDATA_S3_USE_AWS_LC=ON (libcrypto from the pinned aws-lc sources instead of
# the system's OpenSSL: what self-contained wheels use), installs it into a throwaway environment, checks
# that it does not load the system's libcrypto, and runs the TLS tests against it. Never touches the
# editable install.
#
# Usage: scripts/aws-lc.sh [pytest arguments]     (default: the TLS tests: test_tls.py, test_tls_faults.py,
#                                                  test_tls_blinding.py)
# Environment: TORCHDATA_S3_AWSCRT_ARCHIVE  offline CRT sources, passed on to the build
#              AWS_LC_WHEEL                 a wheel built with aws-lc to test instead of building one (what
#                                           scripts/test.sh passes: the cp311 wheel scripts/wheels.sh made)
#              TEST_PROCESSES               processes of the test run (scripts/pytest-processes.sh)
#
# Everything lives in build/aws-lc (layout: scripts/variant-build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
out=$repo/build/aws-lc
started=$SECONDS
step() { echo "aws-lc: [$((SECONDS - started)) s] $*"; }
fail() {
    echo "aws-lc: FAILED: $*" >&2
    exit 1
}

# shellcheck source=scripts/variant-build.sh
source scripts/variant-build.sh
if [[ -n "${AWS_LC_WHEEL:-}" ]]; then
    variant_install "$AWS_LC_WHEEL"
else
    variant_build TORCHDATA_S3_USE_AWS_LC=ON
fi

step "checking that libcrypto is aws-lc, inside the module"
if ldd "$core" | grep -q 'libcrypto'; then
    fail "$core loads a shared libcrypto: $(ldd "$core" | grep libcrypto)"
fi
variant_check_import
echo "aws-lc: $core imported; no shared libcrypto"

step "TLS tests against the aws-lc build"
if (($# == 0)); then
    set -- tests/integration/test_tls.py tests/integration/test_tls_faults.py tests/integration/test_tls_blinding.py
fi
# shellcheck source=scripts/pytest-processes.sh
source scripts/pytest-processes.sh
(cd "$out/view" && "$py" -m pytest --rootdir="$out/view" -c "$out/view/pyproject.toml" -p no:cacheprovider \
    "${pytest_process_args[@]}" "$@")
step "done"
