#!/usr/bin/env bash
# Installs PyTorch into its own virtual environment, .venv-peers/torch, for the DistributedDataParallel
# peer of benchmarks/collective_train.py (gloo backend, CPU).
#
# Why a separate venv: torch is large and pins its own dependencies; it is never a dependency of
# `fleet` and must not land in the project's .venv. PyPI's Linux wheel is used as it is (its CUDA
# libraries come along as dependencies but are not used: the peer runs on CPU).
#
# Idempotent: if the venv already imports torch with gloo support, nothing is downloaded.
# Usage: bash benchmarks/peers/setup_torch.sh   (from anywhere; paths are relative to the repo root)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="${repo_root}/.venv-peers/torch"
python_bin="${PYTHON:-python3}"

check_cmd="import torch, torch.distributed as d, numpy; assert d.is_gloo_available()"
if [[ -x "${venv}/bin/python" ]] && "${venv}/bin/python" -c "${check_cmd}" 2>/dev/null; then
  echo "peer venv ${venv} already has torch with gloo; skipping"
  exit 0
fi

echo "creating peer venv ${venv} with torch"
"${python_bin}" -m venv "${venv}"
"${venv}/bin/python" -m pip install --quiet --upgrade pip
"${venv}/bin/python" -m pip install --quiet torch numpy
"${venv}/bin/python" -c "${check_cmd}; print('torch', torch.__version__, 'ok')"
