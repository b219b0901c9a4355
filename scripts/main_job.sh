#!/usr/bin/env bash
# The main job: set-up (idempotent), then CTR-DNN training. Without arguments it generates
# Criteo-format data from a planted model and trains on it; pass --train FILE... --test FILE to
# train on your own Criteo files. Extra arguments go to examples/ctr_dnn/train.py.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup_env.sh
exec .venv/bin/python examples/ctr_dnn/run_job.py "$@"
