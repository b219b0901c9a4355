"""A dense parameter with its own learning rate (ParamAttr(learning_rate=0.5)) in fleetrun jobs
of 1 server and 1 worker on loopback (scripts/ps_param_lr.py): a GEO job, whose worker applies
the rate with its own update ops, ends where one process ends; a sync job, where the servers
would update it at the optimizer's rate, fails naming the parameter and the rate instead of
training something else than one process does."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest

from tests.python.e2e import launch_helpers as lh

SCRIPT = pathlib.Path(__file__).parent / "scripts" / "ps_param_lr.py"

pytestmark = pytest.mark.timeout(120)


def _run(job_dir: pathlib.Path, launcher: list[str], *args: str) -> subprocess.CompletedProcess:
    """Runs ps_param_lr.py (under `launcher`) writing job_dir/out.npz; its whole process group
    is killed if it outlives the timeout."""
    job_dir.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, *launcher, str(SCRIPT), "--out", str(job_dir / "out.npz"), *args]
    process = subprocess.Popen(
        command,
        env=lh.job_env(job_dir),
        cwd=lh.REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=90)
    finally:
        lh.stop_launcher(process)
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def _parameters(job_dir: pathlib.Path, launcher: list[str], *args: str) -> dict:
    result = _run(job_dir, launcher, *args)
    assert result.returncode == 0, result.stdout + result.stderr
    return dict(np.load(job_dir / "out.npz"))


JOB = ["-m", "fleet.launch", "--server_num=1", "--worker_num=1"]


def test_a_geo_job_trains_a_parameter_at_its_own_rate_as_one_process_does(tmp_path):
    single = _parameters(tmp_path / "single", [], "--single")
    geo = _parameters(tmp_path / "geo", JOB, "--mode", "geo")
    assert set(geo) == set(single) == {"w", "b"}
    for name in single:
        np.testing.assert_allclose(
            geo[name].ravel(), single[name].ravel(), atol=1e-5, rtol=0, err_msg=name
        )
    # Not vacuous: w moved from its initial 0.1 (at half the rate b moves at).
    assert np.abs(single["w"] - 0.1).max() > 1e-3


def test_a_sync_job_refuses_a_dense_parameters_own_rate(tmp_path):
    result = _run(tmp_path / "sync", JOB, "--mode", "sync")
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "dense parameter 'w'" in output and "learning_rate=0.5" in output, output
    assert not (tmp_path / "sync" / "out.npz").exists()
