#!/usr/bin/env bash
# Installs PaddlePaddle into its own virtual environment, .venv-peers/paddle.
#
# Why: the benchmarks compare Fleet against Paddle itself (the peer) in the same run, so a
# figure is a ratio rather than an absolute time. Paddle is ~190 MB and pins its own numpy and
# protobuf, so it must never land in the project's .venv: it is not a dependency of `fleet`.
#
# Idempotent: if the venv already imports the pinned Paddle, nothing is downloaded.
# Usage: bash benchmarks/peers/setup.sh   (from anywhere; paths are relative to the repo root)
set -euo pipefail

readonly PADDLE_VERSION="3.3.1"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="${repo_root}/.venv-peers/paddle"
python_bin="${PYTHON:-python3}"

check_cmd="import paddle, numpy; assert paddle.__version__ == '${PADDLE_VERSION}', paddle.__version__"
if [[ -x "${venv}/bin/python" ]] && "${venv}/bin/python" -c "${check_cmd}" 2>/dev/null; then
  echo "peer venv ${venv} already has paddlepaddle==${PADDLE_VERSION}; skipping"
  exit 0
fi

echo "creating peer venv ${venv} with paddlepaddle==${PADDLE_VERSION}"
"${python_bin}" -m venv "${venv}"
"${venv}/bin/python" -m pip install --quiet --upgrade pip
"${venv}/bin/python" -m pip install --quiet "paddlepaddle==${PADDLE_VERSION}" numpy
"${venv}/bin/python" -c "${check_cmd}; print('paddle', paddle.__version__, 'ok')"
