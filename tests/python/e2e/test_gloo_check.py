"""scripts/gloo_check.py: the workers' Gloo group built as in a PS job, in real processes on
127.0.0.1, and its report of a rank that crashes (rank, signal, native and Python stacks)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[3]
SCRIPT = REPO_ROOT / "scripts" / "gloo_check.py"

pytestmark = pytest.mark.timeout(180)


def _check(tmp_path: pathlib.Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), OPENBLAS_NUM_THREADS="1")
    for name in ("FLEET_GLOO_STORE_ENDPOINT", "FLEET_GLOO_STORE_PATH", "FLEET_GLOO_TIMEOUT_S"):
        env.pop(name, None)
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--log_dir", str(tmp_path / "logs"), *args],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=150,
    )
    return result, json.loads(result.stdout.strip().splitlines()[-1])


def test_three_ranks_with_grpc_open_connect_and_reduce(tmp_path):
    result, summary = _check(tmp_path, "--ranks", "3", "--grpc", "--rounds", "2")
    assert result.returncode == 0, result.stderr
    assert summary["ok"] and summary["ranks"] == 3 and summary["grpc"]
    assert summary["crashes"] == [] and summary["failures"] == []
    # Every rank reported its own line: the connect time of the slowest is there.
    assert summary["connect_s_max"][0] is not None
    for rank in range(3):
        log = (tmp_path / "logs" / "run0" / f"rank{rank}.log").read_text()
        line = json.loads(log.strip().splitlines()[-1])
        assert line["rank"] == rank and line["pulls"] > 0


def test_a_rank_that_crashes_is_named_with_its_signal_and_stacks(tmp_path):
    result, summary = _check(tmp_path, "--ranks", "3", "--crash_rank", "1", "--timeout", "60")
    assert result.returncode == 1
    assert not summary["ok"]
    assert [(c["rank"], c["signal"]) for c in summary["crashes"]] == [(1, "SIGSEGV")]
    # The survivors are reported too, not taken for crashes.
    assert sorted(f["rank"] for f in summary["failures"]) == [0, 2]
    assert "rank 1 died of SIGSEGV" in result.stderr
    # Its log, printed: the native crash report, then Python's stack down to the crash.
    assert "Fleet native crash report" in result.stderr
    assert "string_at" in result.stderr
    assert "in run_rank" in result.stderr.split("*** end of the C++ stack")[1]
