"""A learning-rate schedule on parameter servers running as processes on loopback: every push a
client sends is one step of the schedule of the table it updates, on each server; in a GEO job
through fleetrun each worker trains at the schedule's rate of its own step, as one process does."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest

from fleet.testing.ps_cluster import start_servers
from tests.python.e2e import launch_helpers as lh

SCRIPT = pathlib.Path(__file__).parent / "scripts" / "ps_equivalence.py"

pytestmark = pytest.mark.timeout(120)

SCHEDULE = {"name": "exponential_decay", "learning_rate": 0.1, "decay_steps": 2, "decay_rate": 0.5}
TABLES = [
    {
        "table_id": 1,
        "name": "emb",
        "type": "SPARSE",
        "dim": 4,
        "optimizer": {"learning_rate": 0.1, "sgd": {}, "schedule": SCHEDULE},
        "initializer": {"zero": {}},
    },
    {
        "table_id": 2,
        "name": "dense",
        "type": "DENSE",
        "dim": 10,
        "dense_block_size": 3,
        "optimizer": {"learning_rate": 0.1, "sgd": {}, "schedule": SCHEDULE},
        "initializer": {"zero": {}},
    },
]


def rate(step: int) -> float:
    return 0.1 * 0.5 ** (step / 2)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    servers = start_servers(tmp_path_factory.mktemp("lr"), TABLES, num_servers=2)
    yield servers
    servers.stop()


def test_each_push_is_one_step_of_the_servers_schedule(cluster):
    client = cluster.client()
    keys = np.array([5, -3, 2**40, 8], np.int64)  # rows on both servers
    for step in range(6):
        dense_before = client.pull_dense(2)
        rows_before = client.pull_sparse(1, keys)
        client.push_dense(2, np.ones(10, np.float32))
        client.push_sparse(1, keys, np.ones((4, 4), np.float32))
        np.testing.assert_allclose(dense_before - client.pull_dense(2), rate(step), rtol=1e-5)
        np.testing.assert_allclose(rows_before - client.pull_sparse(1, keys), rate(step), rtol=1e-5)


def _script(job_dir: pathlib.Path, launcher: list[str], *args: str) -> dict:
    """Runs ps_equivalence.py (under `launcher`) and returns the parameters it wrote."""
    job_dir.mkdir(parents=True, exist_ok=True)
    out = job_dir / "out.npz"
    result = subprocess.run(
        [sys.executable, *launcher, str(SCRIPT), "--out", str(out), *args],
        env=lh.job_env(job_dir),
        cwd=lh.REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return dict(np.load(out))


def test_geo_workers_train_at_the_rate_of_each_of_their_steps(tmp_path):
    # Two GEO workers whose k_steps outlast the job train alone from the same start and exchange
    # once, at the end: the servers then hold the start plus the mean of their changes. Each
    # worker's change is one process's training on that worker's share with the same schedule
    # (exponential_decay(0.2, decay_steps=2, decay_rate=0.5): 0.2 at step 0, 0.05 at step 4),
    # for the dense parameters (their update ops read the program's lr variable) and the sparse
    # rows (the worker's local rule steps the schedule once per step, not per key or exchange).
    common = ["--optimizer", "sgd_decay", "--steps", "5"]
    start = _script(tmp_path / "start", [], "--single", "--optimizer", "sgd_decay", "--steps", "0")
    alone = [
        _script(tmp_path / f"alone{w}", [], "--single", "--only_worker", str(w), *common)
        for w in (0, 1)
    ]
    geo = _script(
        tmp_path / "geo",
        ["-m", "fleet.launch", "--server_num=1", "--worker_num=2"],
        "--mode",
        "geo",
        "--geo_steps",
        "100",
        *common,
    )
    assert set(geo) == set(start)
    np.testing.assert_array_equal(geo["ids"], start["ids"])
    for name in start:
        if name == "ids":
            continue
        expected = start[name] + sum(a[name] - start[name] for a in alone) / 2
        np.testing.assert_allclose(geo[name], expected, atol=1e-5, rtol=0, err_msg=name)
    # The comparison is not vacuous: the rows moved.
    assert np.abs(geo["rows"]).max() > 1e-3
