#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan, build/fuzz) and runs each for a while on a
# copy of its committed seed corpus. Usage: bash tests/fuzz/run_fuzz.sh [seconds per target]
# (default 30; CI runs a few seconds, a longer run on demand is e.g. 3600). New interesting
# inputs stay in build/fuzz/corpus/<target>; a crash leaves build/fuzz/crash-* and fails the run.
# The last line per target is "fuzz <target>: <executions> executions in <seconds> s".
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SECONDS_PER_TARGET="${1:-30}"
BUILD="${FLEET_FUZZ_BUILD_DIR:-$ROOT/build/fuzz}"
export CCACHE_BASEDIR="$ROOT" CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S "$ROOT/tests/fuzz" -B "$BUILD" -G Ninja -DCMAKE_CXX_COMPILER=clang++ \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
ninja -C "$BUILD" -j "${FLEET_BUILD_JOBS:-$(nproc)}" | grep -vE '^\[[0-9]+/[0-9]+\] ' || true
test "${PIPESTATUS[0]}" -eq 0
for target in multislot_parser_fuzz tcp_store_frame_fuzz; do
  corpus="$BUILD/corpus/$target"
  mkdir -p "$corpus"
  log="$BUILD/$target.log"
  # Inputs up to 64 KiB; leaks are reported (detect_leaks), one job, seeds read from the repo.
  (cd "$BUILD" && "./$target" -max_total_time="$SECONDS_PER_TARGET" -max_len=65536 \
      -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
      "$corpus" "$ROOT/tests/fuzz/corpus/${target%_fuzz}") >"$log" 2>&1 || {
    tail -40 "$log"
    echo "fuzz $target: FAILED (log: $log)"
    exit 1
  }
  runs=$(grep -oP 'stat::number_of_executed_units:\s*\K[0-9]+' "$log" | tail -1)
  echo "fuzz $target: ${runs:-?} executions in $SECONDS_PER_TARGET s"
done
