#!/usr/bin/env bash
# Prepares a fresh machine for Fleet: Debian build dependencies, the Python virtual environment
# at .venv, and an in-place build of the extension (build/dev, cached by ccache). Idempotent:
# a second run only rebuilds what changed. Sourced by main_job.sh and run_tests.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

DEBS=(build-essential cmake ninja-build ccache pkg-config python3-venv
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
      libabsl-dev libgloo-dev libopenblas-dev libgtest-dev libdeflate-dev
      librocksdb-dev  # the SSD tier of sparse tables (csrc/ps/table/ssd)
      clang libclang-rt-14-dev clang-format  # clang: the libFuzzer targets of tests/fuzz
      prometheus)  # the Prometheus server tests/python/e2e/test_metrics.py runs
missing=()
for pkg in "${DEBS[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[setup] installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv"
  "$PY" -m venv .venv
fi
# Re-install only when the requirement list changed.
REQ_STAMP=.venv/.fleet-requirements
if ! cmp -s requirements-dev.txt "$REQ_STAMP" 2>/dev/null; then
  echo "[setup] installing Python packages into .venv"
  .venv/bin/pip install -q --disable-pip-version-check -r requirements-dev.txt
  cp requirements-dev.txt "$REQ_STAMP"
fi

bash scripts/build.sh
