#!/usr/bin/env bash
# Builds the parameter-server fuzz targets (tests/fuzz/ps_*_fuzz.cc) with clang into build/fuzz
# and runs each for FLEET_FUZZ_SECONDS (default 5) seconds on its committed seed corpus
# (tests/fuzz/ps_corpus/<target>). New inputs go to a scratch corpus, never into the committed
# seeds; a crash is written to build/fuzz/artifacts/ and fails the run. Longer, on demand:
#   FLEET_FUZZ_SECONDS=3600 bash tests/fuzz/ps_fuzz.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
export CCACHE_BASEDIR="$ROOT" CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
BUILD=build/fuzz
SECONDS_EACH="${FLEET_FUZZ_SECONDS:-5}"
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S tests/fuzz -B "$BUILD" -G Ninja -DCMAKE_CXX_COMPILER=clang++ \
        -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
fi
ninja -C "$BUILD" -j "${FLEET_BUILD_JOBS:-$(nproc)}" ps_service_fuzz ps_checkpoint_fuzz \
  | grep -vE '^\[[0-9]+/[0-9]+\] ' || true
test "${PIPESTATUS[0]}" -eq 0
mkdir -p "$BUILD/artifacts"
status=0
for target in ps_service_fuzz ps_checkpoint_fuzz; do
  scratch="$(mktemp -d)"
  log="$BUILD/$target.log"
  if "$BUILD/$target" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
       -artifact_prefix="$BUILD/artifacts/$target-" "$scratch" "tests/fuzz/ps_corpus/$target" \
       >"$log" 2>&1; then
    echo "[fuzz] $target: $(grep -E '^Done [0-9]+ runs' "$log")"
  else
    echo "[fuzz] $target FAILED (log: $log)"
    grep -E 'ERROR|SUMMARY|runtime error' "$log" | head -5
    status=1
  fi
  rm -rf "$scratch"
done
exit $status
