"""A learning-rate schedule on parameter servers running as processes on loopback: every push a
client sends is one step of the schedule of the table it updates, on each server."""

from __future__ import annotations

import numpy as np
import pytest

from fleet.testing.ps_cluster import start_servers

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
