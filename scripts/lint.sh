#!/usr/bin/env bash
# Style checks, run by scripts/run_tests.sh: ruff's linter and formatter check on the Python
# (configured in pyproject.toml), clang-format on every tracked C++/CUDA file (.clang-format).
# Fix what it reports with `.venv/bin/ruff format . && .venv/bin/ruff check --fix .` and
# `git ls-files '*.h' '*.cc' '*.cu' | xargs clang-format -i`.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
status=0
echo "[lint] ruff check"
.venv/bin/ruff check --output-format concise . || status=1
echo "[lint] ruff format --check"
.venv/bin/ruff format --check . || status=1
echo "[lint] clang-format"
git ls-files '*.h' '*.cc' '*.cu' | xargs clang-format --dry-run -Werror || status=1
exit $status
