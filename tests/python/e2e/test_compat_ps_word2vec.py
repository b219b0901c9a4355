"""Paddle's nce word2vec network as a parameter-server job through fleetrun (1 server, 2
workers on 127.0.0.1): the nce weight's sparse gradient goes to the dense table as a dense one,
the servers step an exponential_decay rate, and both workers' losses fall, sync and async."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

from tests.python.e2e import launch_helpers as lh

SCRIPT = pathlib.Path(__file__).parent / "scripts" / "compat_word2vec_ps.py"


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_word2vec_with_nce_and_a_decayed_rate_learns_on_parameter_servers(tmp_path, mode):
    job = tmp_path / "job"
    job.mkdir()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "fleet.launch",
            "--server_num=1",
            "--worker_num=2",
            f"--log_dir={job / 'logs'}",
            str(SCRIPT),
            "--mode",
            mode,
        ],
        env=lh.job_env(job),
        cwd=lh.REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    logs = "".join(p.read_text() for p in sorted((job / "logs").glob("workerlog.*")))
    pairs = re.findall(r"first_loss=([\d.]+) last_loss=([\d.]+)", logs)
    assert len(pairs) == 2, logs
    for first, last in pairs:
        assert float(last) < 0.5 * float(first), logs
