#!/usr/bin/env bash
# The whole test suite: set-up (idempotent), style checks (ruff, clang-format), C++ unit tests
# (ctest), then pytest on 2 workers.
# pytest's exit code 5 (no tests collected) is a failure here, never a pass.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup_env.sh || exit 1

status=0
echo "[tests] style (scripts/lint.sh)"
bash scripts/lint.sh || status=1

if [ -f build/dev/CTestTestfile.cmake ]; then
  echo "[tests] C++ unit tests"
  ctest --test-dir build/dev --output-on-failure -j 2 || status=1
fi

echo "[tests] Python tests"
.venv/bin/python -m pytest -n "${FLEET_TEST_WORKERS:-2}" --dist loadgroup -q -rs \
    --durations=15 "$@"
rc=$?
if [ $rc -eq 5 ]; then
  echo "[tests] pytest collected no tests: failing"
  rc=1
fi
[ $rc -ne 0 ] && status=$rc
exit $status
