#!/usr/bin/env bash
# The whole test suite: set-up (idempotent), style checks (ruff, clang-format), C++ unit tests
# (ctest), then pytest on 2 workers.
# pytest's exit code 5 (no tests collected) is a failure here, never a pass.
#
#   scripts/run_tests.sh --repeat N [pytest args]   runs the distributed tests (tests/python/e2e,
#       or the paths given) N times in a row, to find flaky ones; prints each round's failures
#       and, at the end, how often each test failed. Run it beside a CPU-heavy process to see
#       how the tests fare on a loaded machine.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  sed -n '2,/^set /p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
  echo "Any other arguments go to pytest (e.g. a test path, -k EXPR)."
  exit 0
fi
bash scripts/setup_env.sh || exit 1

if [ "${1:-}" = "--repeat" ]; then
  rounds="${2:?--repeat takes a number of rounds}"
  shift 2
  [ $# -eq 0 ] && set -- tests/python/e2e
  failures="$(mktemp)"
  for round in $(seq "$rounds"); do
    echo "[tests] round $round of $rounds: $*"
    # Through cat's inherited stderr: tee /dev/stderr would reopen a redirected stderr (O_TRUNC),
    # leaving only the last round in the file.
    .venv/bin/python -m pytest -n "${FLEET_TEST_WORKERS:-2}" --dist loadgroup -q -rfE "$@" \
        | tee >(cat >&2) | sed -n 's/^\(FAILED\|ERROR\) \([^ ]*\).*/\2 (\1)/p' >> "$failures"
    # A round that failed without naming a test (collection error, crash, timeout) counts too.
    rc=${PIPESTATUS[0]}
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then
      echo "round $round: pytest exit $rc (no test named)" >> "$failures"
    fi
  done
  echo "[tests] failures over $rounds rounds (count, test):"
  sort "$failures" | uniq -c | sort -rn
  count=$(wc -l < "$failures")
  rm -f "$failures"
  [ "$count" -eq 0 ]
  exit $?
fi

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
