#!/usr/bin/env bash
# Issue #28's scaling run on a lent 16-core machine, CPU only: builds Fleet's extension there
# (scripts/gpu_check.sh's unpacking and build, no CUDA test or GPU benchmark) and runs
# benchmarks/ps_train.py at 2 servers x 6 workers and 4 servers x 12 workers, each against Fleet's
# single process in the same run. Logs and each run's JSON land under $OUT.
#
# Here first: bash scripts/gpu_deps_pack.sh [--source-only]   (the device builds that snapshot)
# The device call (the tool `run`, carry [".gpu_deps"], timeout_s 570):
#     bash scripts/ps_scale_check.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exec env GPU_CHECK_SKIP="cpp py bench" GPU_CHECK_TARGETS=_core \
  GPU_CHECK_PS_SCALE="${GPU_CHECK_PS_SCALE:-2x6 4x12}" bash "$ROOT/scripts/gpu_check.sh"
