"""PsClient.push_pull_sparse (GEO's exchange in one round trip) against parameter servers running
as real processes on loopback: the rows it returns are those of a push and then a pull on a
second group of servers holding the same table, over the wire and through shared memory, and
arrays that disagree with the keys are refused."""

from __future__ import annotations

import numpy as np
import pytest

from fleet.errors import InvalidArgument

pytestmark = pytest.mark.timeout(120)

TABLE_ID = 3
DIM = 6
TABLE = {
    "table_id": TABLE_ID,
    "name": "embedding",
    "type": "SPARSE",
    "dim": DIM,
    "optimizer": {"learning_rate": 0.05, "adam": {}},
    "initializer": {"seed": 9, "uniform": {"low": -0.5, "high": 0.5}},
}


def _client(cluster, shared_memory: bool):
    host = cluster.endpoints[0].rsplit(":", 1)[0]
    return cluster.client(local_host=host, local_socket=False, local_shared_memory=shared_memory)


@pytest.mark.parametrize("shared_memory", [False, True], ids=["wire", "shm"])
def test_push_pull_returns_the_rows_of_a_push_then_a_pull(ps_servers, shared_memory):
    two_calls = _client(ps_servers([TABLE], num_servers=2, tag="two"), shared_memory)
    one_call = _client(ps_servers([TABLE], num_servers=2, tag="one"), shared_memory)
    rng = np.random.default_rng(4)
    try:
        for step in range(4):
            # Distinct keys as GEO sends, then repeats, whose values are summed first.
            keys = rng.choice(np.arange(-500, 500), size=300, replace=False).astype(np.int64)
            if step % 2:
                keys = np.concatenate([keys, keys[:40]])
            values = (rng.standard_normal((keys.size, DIM)) * 0.1).astype(np.float32)
            for delta in (True, False):
                two_calls.push_sparse(TABLE_ID, keys, values, delta=delta)
                pulled = two_calls.pull_sparse(TABLE_ID, keys)
                returned = one_call.push_pull_sparse(TABLE_ID, keys, values, delta=delta)
                assert returned.shape == (keys.size, DIM)
                assert returned.tobytes() == pulled.tobytes(), (step, delta)
    finally:
        two_calls.close()
        one_call.close()


def test_arrays_that_disagree_with_the_keys_are_refused(ps_servers):
    client = _client(ps_servers([TABLE]), shared_memory=True)
    keys = np.array([1, 2, 3], dtype=np.int64)
    before = client.pull_sparse(TABLE_ID, keys)
    try:
        with pytest.raises(InvalidArgument, match="3 keys of dim 6 need 18 floats, got 17"):
            client.push_pull_sparse(TABLE_ID, keys, np.ones(17, np.float32), delta=True)
        with pytest.raises(InvalidArgument, match="need 18 output floats, got 12"):
            client.push_pull_sparse(
                TABLE_ID, keys, np.ones(18, np.float32), np.empty(12, np.float32), delta=True
            )
        # Nothing was pushed.
        assert client.pull_sparse(TABLE_ID, keys).tobytes() == before.tobytes()
    finally:
        client.close()
