"""The collective example trains in one process and under fleetrun with two ranks, to the same
test accuracy band, and ends cleanly."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fleet.testing.scripts import last_value, run_script
from tests.python.e2e import launch_helpers as lh

pytestmark = pytest.mark.timeout(180)

SCRIPT = lh.REPO_ROOT / "examples" / "collective" / "train_dense.py"
SMALL = ["--train_rows=8000", "--test_rows=4000", "--epochs=2", "--print_period=20"]


def test_dense_example_in_one_process():
    out = run_script([SCRIPT, *SMALL], timeout=120, cwd=lh.REPO_ROOT)
    assert "samples/s (1 rank(s))" in out
    assert last_value(out, "test_accuracy") > 0.85


def test_dense_example_under_fleetrun_with_two_ranks(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fleet.launch",
            "--collective",
            "--nproc_per_node=2",
            str(SCRIPT),
            *SMALL,
        ],
        env=lh.job_env(tmp_path, collective=True),
        cwd=lh.REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout.replace("[worker.0] ", "")
    assert "samples/s (2 rank(s))" in out
    assert last_value(out, "test_accuracy") > 0.85
