# Sourced (not run) by the scripts that test another build of torchdata_s3 than the editable one
# (scripts/sanitize.sh, scripts/aws-lc.sh): builds the wheel with the given CMake switches, installs it into a
# throwaway environment over the current one, and makes a view of the checkout that imports it.
#
# The caller sets: repo (the checkout), out (the variant's folder under build/), step and fail (its logging).
# variant_build ENV_ASSIGNMENT... [-- PIP_WHEEL_ARGS...] then sets: py (the environment's python), site (where
# the wheel is installed), core (the installed _core*.so). variant_install WHEEL does the same for a wheel
# built elsewhere (scripts/wheels.sh).
#
# Layout of $out: cmake/ (the build, kept: a second run only recompiles what changed), dist/ (the wheel),
# venv/ (the environment), view/ (the checkout without torchdata_s3/, so that tests import this build).

variant_build() {
    local -a env_assignments=() wheel_args=()
    while (($# > 0)) && [[ "$1" != -- ]]; do
        env_assignments+=("$1")
        shift
    done
    (($# > 0)) && shift
    wheel_args=("$@")

    step "building the wheel in $out/cmake"
    if [[ -z "${TORCHDATA_S3_AWSCRT_ARCHIVE:-}" ]]; then
        # Reuse the CRT sources the regular build fetched (the build checks their sha256 either way).
        local archive
        for archive in "$repo"/build/*/awscrt/awscrt-*.tar.gz; do
            [[ -e "$archive" ]] && export TORCHDATA_S3_AWSCRT_ARCHIVE="$archive" && break
        done
    fi
    python -m pip install --quiet --disable-pip-version-check "scikit-build-core>=0.10" "pybind11>=2.12"
    rm -rf "$out/dist"
    env "${env_assignments[@]}" python -m pip wheel --quiet --disable-pip-version-check --no-build-isolation \
        --no-deps --wheel-dir "$out/dist" -Cbuild-dir="$out/cmake" "${wheel_args[@]}" .
    variant_install "$out"/dist/*.whl
}

# variant_install WHEEL: installs it into $out/venv over the current environment and makes $out/view.
variant_install() {
    step "installing $(basename "$1") into a throwaway environment ($out/venv)"
    rm -rf "$out/venv"
    python -m venv --without-pip "$out/venv"
    py="$out/venv/bin/python"
    site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    # The base environment's packages (torch, pytest, moto, ...) as plain path entries: site.py then does not
    # run their .pth files, among them the editable install's import hook, which would map torchdata_s3 to
    # the checkout and its extension whatever sys.path says.
    python -c 'import site; print("\n".join(site.getsitepackages()))' >"$site/base-site-packages.pth"
    python -m pip install --quiet --disable-pip-version-check --no-deps --target "$site" "$1"
    core=$(ls "$site"/torchdata_s3/_core*.so)
    # Python runs from a view of the checkout without torchdata_s3/ (the current folder comes first on
    # sys.path and would shadow the installed copy), so that tests and fuzz targets import this build.
    rm -rf "$out/view"
    mkdir -p "$out/view"
    local entry
    for entry in "$repo"/* "$repo"/.[!.]*; do
        [[ -e "$entry" ]] || continue
        case "$(basename "$entry")" in torchdata_s3 | build | .git) continue ;; esac
        ln -s "$entry" "$out/view/"
    done
}

# Fails unless `import torchdata_s3._core` in the view finds the installed build.
variant_check_import() {
    (cd "$out/view" && "$py" - "$site") <<'EOF'
import sys
import torchdata_s3._core as core
assert core.__file__.startswith(sys.argv[1] + "/"), f"imported {core.__file__}, not the build in {sys.argv[1]}"
EOF
}
