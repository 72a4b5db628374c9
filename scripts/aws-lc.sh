#!/usr/bin/env bash
# Builds torchdata_s3 with TORCHDATA_S3_USE_AWS_LC=ON (libcrypto from the pinned aws-lc sources instead of
# the system's OpenSSL: what self-contained wheels use), installs it into a throwaway environment, checks
# that it does not load the system's libcrypto, and runs the TLS tests against it. Never touches the
# editable install.
#
# Usage: scripts/aws-lc.sh [pytest arguments]     (default: tests/integration/test_tls.py)
# Environment: TORCHDATA_S3_AWSCRT_ARCHIVE  offline CRT sources, passed on to the build
#
# Everything lives in build/aws-lc: cmake/ (the build, kept: a second run only recompiles what changed),
# dist/ (the wheel), venv/ (the environment), view/ (the checkout without torchdata_s3/, so that the tests
# import the aws-lc build).
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

step "building the wheel in $out/cmake"
if [[ -z "${TORCHDATA_S3_AWSCRT_ARCHIVE:-}" ]]; then
    # Reuse the CRT sources the regular build fetched (the build checks their sha256 either way).
    for archive in "$repo"/build/*/awscrt/awscrt-*.tar.gz; do
        [[ -e "$archive" ]] && export TORCHDATA_S3_AWSCRT_ARCHIVE="$archive" && break
    done
fi
python -m pip install --quiet --disable-pip-version-check "scikit-build-core>=0.10" "pybind11>=2.12"
rm -rf "$out/dist"
TORCHDATA_S3_USE_AWS_LC=ON python -m pip wheel --quiet --disable-pip-version-check --no-build-isolation \
    --no-deps --wheel-dir "$out/dist" -Cbuild-dir="$out/cmake" .

step "installing it into a throwaway environment ($out/venv)"
rm -rf "$out/venv"
python -m venv --without-pip "$out/venv"
py="$out/venv/bin/python"
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# The base environment's packages as plain path entries, so that the editable install's import hook (a
# .pth file) does not map torchdata_s3 back to the checkout.
python -c 'import site; print("\n".join(site.getsitepackages()))' >"$site/base-site-packages.pth"
python -m pip install --quiet --disable-pip-version-check --no-deps --target "$site" "$out"/dist/*.whl
core=$(ls "$site"/torchdata_s3/_core*.so)
rm -rf "$out/view"
mkdir -p "$out/view"
shopt -s nullglob
for entry in "$repo"/* "$repo"/.[!.]*; do
    case "$(basename "$entry")" in torchdata_s3 | build | .git) continue ;; esac
    ln -s "$entry" "$out/view/"
done

step "checking that libcrypto is aws-lc, inside the module"
if ldd "$core" | grep -q 'libcrypto'; then
    fail "$core loads a shared libcrypto: $(ldd "$core" | grep libcrypto)"
fi
(cd "$out/view" && "$py" - "$site") <<'EOF'
import sys
import torchdata_s3._core as core
assert core.__file__.startswith(sys.argv[1] + "/"), f"imported {core.__file__}, not the aws-lc build"
print(f"aws-lc: {core.__file__} imported; no shared libcrypto")
EOF

step "TLS tests against the aws-lc build"
if (($# == 0)); then set -- tests/integration/test_tls.py; fi
(cd "$out/view" && "$py" -m pytest --rootdir="$out/view" -c "$out/view/pyproject.toml" -p no:cacheprovider "$@")
step "done"
