"""The collective example trains in one process and under fleetrun with two ranks, to the same
test accuracy band, and ends cleanly."""

from __future__ import annotations

import re
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


CTR_SCRIPT = lh.REPO_ROOT / "examples" / "collective" / "train_ctr_dnn.py"


@pytest.mark.slow
def test_ctr_dnn_two_ranks_match_one_process_with_the_joined_batch(tmp_path):
    """CTR-DNN with a shared, hashed embedding table (its sparse gradient gathered across ranks):
    2 ranks of batch 256 make the updates of one process of batch 512, so the test AUCs agree."""
    subprocess.run(
        [sys.executable, str(lh.REPO_ROOT / "examples" / "ctr_dnn" / "generate_data.py"),
         "--out", str(tmp_path), "--train_rows", "20000", "--test_rows", "5000"],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    files = ["--train", str(tmp_path / "train.txt"), "--test", str(tmp_path / "test.txt")]
    single = run_script([CTR_SCRIPT, *files, "--batch_size=512"], timeout=150, cwd=lh.REPO_ROOT)
    proc = subprocess.run(
        [sys.executable, "-m", "fleet.launch", "--collective", "--nproc_per_node=2",
         str(CTR_SCRIPT), *files, "--batch_size=256"],
        env=lh.job_env(tmp_path, collective=True), cwd=lh.REPO_ROOT, capture_output=True,
        text=True, timeout=150,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "(2 rank(s))" in proc.stdout
    ranks_auc = float(re.findall(r"test_auc=([0-9.]+)", proc.stdout)[-1])  # "[worker.0] ..."
    assert abs(ranks_auc - last_value(single, "test_auc")) < 0.003, (ranks_auc, single[-200:])
