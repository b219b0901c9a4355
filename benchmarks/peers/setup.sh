#!/usr/bin/env bash
# Installs PaddlePaddle into its own virtual environments under .venv-peers/:
#   .venv-peers/paddle     paddlepaddle 3.3.1 (ctr_dnn_train.py, data_feed.py)
#   .venv-peers/paddle26   paddlepaddle 2.6.2 (ps_train.py)
#
# Why: the benchmarks compare Fleet against Paddle itself (the peer) in the same run, so a
# figure is a ratio rather than an absolute time. Paddle is ~190 MB and pins its own numpy and
# protobuf, so it must never land in the project's .venv: it is not a dependency of `fleet`.
# Why two versions: PyPI's 3.3.1 CPU wheel is built without the parameter-server core (no
# DistFleetWrapper, no send / distributed_lookup_table ops), so every PS mode fails there;
# 2.6.2 is the newest CPU wheel that has it, and it needs numpy<2 and protobuf<5.
#
# Idempotent: a venv that already imports its pinned Paddle is left alone.
# Usage: bash benchmarks/peers/setup.sh [all|3.3.1|2.6.2]   (default all; from anywhere)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
python_bin="${PYTHON:-python3}"
which="${1:-all}"

# install_peer VENV_NAME VERSION [EXTRA_REQUIREMENT...]
install_peer() {
  local venv="${repo_root}/.venv-peers/$1" version="$2"
  shift 2
  local check_cmd="import paddle, numpy; assert paddle.__version__ == '${version}', paddle.__version__"
  if [[ -x "${venv}/bin/python" ]] && "${venv}/bin/python" -c "${check_cmd}" 2>/dev/null; then
    echo "peer venv ${venv} already has paddlepaddle==${version}; skipping"
    return 0
  fi
  echo "creating peer venv ${venv} with paddlepaddle==${version}"
  "${python_bin}" -m venv "${venv}"
  "${venv}/bin/python" -m pip install --quiet --upgrade pip
  "${venv}/bin/python" -m pip install --quiet "paddlepaddle==${version}" numpy "$@"
  "${venv}/bin/python" -c "${check_cmd}; print('paddle', paddle.__version__, 'ok')"
}

case "${which}" in
  all|3.3.1) install_peer paddle 3.3.1 ;;&
  all|2.6.2) install_peer paddle26 2.6.2 "numpy<2" "protobuf<5" ;;
  3.3.1) ;;
  *) echo "usage: $0 [all|3.3.1|2.6.2]" >&2; exit 2 ;;
esac
