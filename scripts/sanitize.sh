#!/usr/bin/env bash
# The C++ unit tests under AddressSanitizer + UndefinedBehaviorSanitizer: a separate build
# (build/asan, GCC's sanitizers, ccache) of the GoogleTest executables, then ctest, which fails on
# the first sanitizer report (halt_on_error). The libFuzzer targets already run sanitized in the
# test command (tests/fuzz); this adds the unit tests.
#
# Not part of scripts/run_tests.sh: a sanitized build of the whole tree takes longer than CI's
# budget on 2 cores allows next to the normal build. Run it before merging changes to C++
# (memory handling, threads, the PS engine) and at least weekly:
#     bash scripts/sanitize.sh            # build + all C++ tests
#     bash scripts/sanitize.sh -R Tensor  # extra arguments go to ctest
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export CCACHE_BASEDIR="$ROOT" CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
BUILD="${FLEET_ASAN_BUILD_DIR:-build/asan}"
FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
if [ ! -f "$BUILD/build.ninja" ]; then
  # CUDA off: the sanitizers instrument host code, and no GPU runs the CUDA tests here anyway.
  cmake -S . -B "$BUILD" -G Ninja -DPython3_EXECUTABLE="$ROOT/.venv/bin/python" \
        -DFLEET_WITH_CUDA=OFF -DFLEET_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_CXX_FLAGS="$FLAGS" -DCMAKE_EXE_LINKER_FLAGS="$FLAGS" \
        -DCMAKE_SHARED_LINKER_FLAGS="$FLAGS" >/dev/null
fi
echo "[sanitize] building the C++ tests with ASan + UBSan ($BUILD)"
ninja -C "$BUILD" -j "${FLEET_BUILD_JOBS:-$(nproc)}" fleet_cpp_tests fleet_data_tests \
      fleet_trainer_tests | grep -vE '^\[[0-9]+/[0-9]+\] ' || true
test "${PIPESTATUS[0]}" -eq 0
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:strict_string_checks=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
ctest --test-dir "$BUILD" --output-on-failure -j "$(nproc)" "$@"
