"""Parameter servers as real processes on loopback: round trips against NumPy references,
concurrent clients, malformed requests, barriers."""

from __future__ import annotations

import queue
import threading

import numpy as np
import pytest

from fleet import _core
from fleet.errors import InvalidArgument, NotFound, Timeout
from fleet.proto import ps_pb2
from fleet.testing.ps_cluster import start_servers
from fleet.testing.ps_reference import OPTIMIZERS, ReferenceRule
from tests.python import _ps_testing

pytestmark = pytest.mark.timeout(120)

NAMES = sorted(OPTIMIZERS)  # adagrad, adam, sgd
SPARSE_ID = {name: 10 + i for i, name in enumerate(NAMES)}
DENSE_ID = {name: 20 + i for i, name in enumerate(NAMES)}
EXACT_ID = 30  # SGD with lr 1 and zero init: sums of dyadic gradients are exact
PUSH_PULL_ID = {name: 40 + i for i, name in enumerate(NAMES)}  # pushed only through push-pull
TABLES = (
    [
        {
            "table_id": SPARSE_ID[n],
            "name": f"emb_{n}",
            "type": "SPARSE",
            "dim": 4,
            "optimizer": OPTIMIZERS[n],
            "initializer": {"seed": 5, "uniform": {"low": -1, "high": 1}},
        }
        for n in NAMES
    ]
    + [
        {
            "table_id": ids[n],
            "name": f"{prefix}_{n}",
            "type": "DENSE",
            "dim": 11,
            "dense_block_size": 3,
            "optimizer": OPTIMIZERS[n],
            "initializer": {"seed": 6, "gaussian": {"std": 0.5}},
        }
        for ids, prefix in ((DENSE_ID, "fc"), (PUSH_PULL_ID, "pp"))
        for n in NAMES
    ]
    + [
        {
            "table_id": EXACT_ID,
            "name": "exact",
            "type": "SPARSE",
            "dim": 8,
            "optimizer": {"learning_rate": 1.0, "sgd": {}},
            "initializer": {"zero": {}},
        }
    ]
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    servers = start_servers(tmp_path_factory.mktemp("rpc"), TABLES, num_servers=2)
    yield servers
    servers.stop()


@pytest.mark.parametrize("name", NAMES)
def test_sparse_round_trip_matches_reference(cluster, name):
    client = cluster.client()
    table, ref = SPARSE_ID[name], ReferenceRule(OPTIMIZERS[name])
    keys = np.array([3, -7, 3, 2**62, -(2**63), 11, 12, 13], dtype=np.int64)
    distinct = np.unique(keys)
    first = client.pull_sparse(table, distinct)
    rows = {k: (w, ref.init_state(4)) for k, w in zip(distinct, first)}
    rng = np.random.default_rng(7)
    for _ in range(3):
        grads = rng.standard_normal((keys.size, 4)).astype(np.float32)
        client.push_sparse(table, keys, grads)
        summed = {k: grads[keys == k].sum(axis=0) for k in distinct}  # repeats are merged
        rows = {k: ref.update(*rows[k], summed[k]) for k in distinct}
    pulled = client.pull_sparse(table, keys)
    expected = np.stack([rows[k][0] for k in keys])
    np.testing.assert_allclose(pulled, expected, rtol=1e-5, atol=1e-6)
    assert client.table_config(table).dim == 4


@pytest.mark.parametrize("name", NAMES)
def test_dense_round_trip_matches_reference(cluster, name):
    client = cluster.client()
    table, ref = DENSE_ID[name], ReferenceRule(OPTIMIZERS[name])
    w = client.pull_dense(table)
    assert w.shape == (11,) and np.unique(w).size == 11
    # One rule state per block of 3 (blocks alternate between the two servers).
    blocks = [slice(b, min(b + 3, 11)) for b in range(0, 11, 3)]
    states = [ref.init_state(s.stop - s.start) for s in blocks]
    rng = np.random.default_rng(8)
    for _ in range(3):
        g = rng.standard_normal(11).astype(np.float32)
        client.push_dense(table, g)
        for i, s in enumerate(blocks):
            w[s], states[i] = ref.update(w[s], states[i], g[s])
    np.testing.assert_allclose(client.pull_dense(table), w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_dense_push_pull_returns_the_values_after_the_push(cluster, name):
    client = cluster.client()
    table, ref = PUSH_PULL_ID[name], ReferenceRule(OPTIMIZERS[name])
    w = client.pull_dense(table)
    blocks = [slice(b, min(b + 3, 11)) for b in range(0, 11, 3)]
    states = [ref.init_state(s.stop - s.start) for s in blocks]
    rng = np.random.default_rng(9)
    out = np.full(11, np.nan, np.float32)
    for _ in range(3):
        g = rng.standard_normal(11).astype(np.float32)
        returned = client.push_pull_dense(table, g, out)
        for i, s in enumerate(blocks):
            w[s], states[i] = ref.update(w[s], states[i], g[s])
        assert returned is out
        np.testing.assert_allclose(out, w, rtol=1e-5, atol=1e-6)
        # Both servers' blocks, exactly as a pull reads them after the push.
        np.testing.assert_array_equal(out, client.pull_dense(table))
    with pytest.raises(InvalidArgument, match="PushPullDense of table"):
        client.push_pull_dense(table, g, np.empty(10, np.float32))
    np.testing.assert_array_equal(client.pull_dense(table), out)


def test_delta_pushes_add_to_rows(cluster):
    client = cluster.client()
    keys = np.array([501, -502], dtype=np.int64)
    before = client.pull_sparse(SPARSE_ID["adam"], keys)
    delta = np.full((2, 4), 0.25, np.float32)
    client.push_sparse(SPARSE_ID["adam"], keys, delta, delta=True)
    np.testing.assert_allclose(client.pull_sparse(SPARSE_ID["adam"], keys), before + delta)
    dense_before = client.pull_dense(DENSE_ID["sgd"])
    client.push_dense(DENSE_ID["sgd"], np.ones(11, np.float32), delta=True)
    np.testing.assert_allclose(client.pull_dense(DENSE_ID["sgd"]), dense_before + 1)


def test_four_threads_on_two_servers_sum_every_update(cluster):
    """Threads push to shared keys (all threads) and own keys (one thread each) while pulling;
    the final rows must equal minus the sum of every gradient sent."""
    shared = np.arange(-300, 300, dtype=np.int64) * 1_000_003
    own = [np.arange(1000, 1400, dtype=np.int64) + 10_000 * t for t in range(4)]
    steps, expected = 25, {}
    plans = []
    for t in range(4):
        rng = np.random.default_rng(100 + t)
        plan = []
        for _ in range(steps):
            keys = np.concatenate([shared, own[t], shared[:50]])  # with repeats
            grads = rng.integers(-8, 9, (keys.size, 8)).astype(np.float32) / 8
            plan.append((keys, grads))
            for k, g in zip(keys, grads):
                expected[k] = expected.get(k, 0) - g.astype(np.float64)
        plans.append(plan)
    shared_client = cluster.client()
    clients = [shared_client, shared_client, cluster.client(), cluster.client()]
    errors = []

    def work(t):
        try:
            for keys, grads in plans[t]:
                pending = clients[t].pull_sparse_async(EXACT_ID, keys)
                clients[t].push_sparse(EXACT_ID, keys, grads)
                assert pending.wait().shape == (keys.size, 8)
        except Exception as e:  # reported below, with the thread
            errors.append((t, e))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=100)
    assert not errors, errors
    keys = np.array(sorted(expected), dtype=np.int64)
    final = shared_client.pull_sparse(EXACT_ID, keys)
    np.testing.assert_array_equal(final, np.stack([expected[k] for k in keys]).astype(np.float32))
    rows = [
        next(t for t in server if t.table_id == EXACT_ID).rows for server in shared_client.stats()
    ]
    assert sum(rows) == keys.size and min(rows) > 0  # both servers hold a share


def raw(cluster, method, request, reply_type, server=0):
    reply = _ps_testing.raw_call(cluster.endpoints[server], method, request.SerializeToString())
    return reply_type.FromString(reply)


def test_malformed_requests_get_errors_and_leave_tables_unchanged(cluster):
    client = cluster.client()
    table = SPARSE_ID["sgd"]
    keys = np.array([77, 78], dtype=np.int64)
    owner = _core.ps.hash_key_shard(keys, 2)
    before = client.pull_sparse(table, keys)

    def push(table_id, keys_bytes, grads_bytes, server):
        request = ps_pb2.PushSparseRequest(table_id=table_id, keys=keys_bytes, grads=grads_bytes)
        return raw(cluster, "PushSparse", request, ps_pb2.PushReply, server).status

    good_keys = keys[owner == 0].tobytes() if (owner == 0).any() else keys[:1].tobytes()
    n = len(good_keys) // 8
    status = push(999, good_keys, np.zeros(4 * n, np.float32).tobytes(), 0)
    assert status.code == 5 and "no sparse table 999" in status.message  # NOT_FOUND
    status = push(table, good_keys, np.zeros(4 * n + 1, np.float32).tobytes(), 0)
    assert status.code == 3 and "dim 4" in status.message  # INVALID_ARGUMENT
    status = push(table, good_keys + b"\x01", np.zeros(4 * n, np.float32).tobytes(), 0)
    assert status.code == 3 and "whole number" in status.message
    nan = np.zeros(4 * n, np.float32)
    nan[-1] = np.nan
    status = push(table, good_keys, nan.tobytes(), 0)
    assert status.code == 3 and "NaN" in status.message
    dense = ps_pb2.PushDenseRequest(
        table_id=DENSE_ID["sgd"], grads=np.ones(5, np.float32).tobytes()
    )
    status = raw(cluster, "PushDense", dense, ps_pb2.PushReply).status
    assert status.code == 3 and "holds" in status.message
    pull = ps_pb2.PullSparseRequest(table_id=DENSE_ID["sgd"], keys=good_keys)
    assert raw(cluster, "PullSparse", pull, ps_pb2.PullSparseReply).status.code == 5
    np.testing.assert_array_equal(client.pull_sparse(table, keys), before)
    # The client refuses what it can check before sending, naming the table.
    with pytest.raises(NotFound, match="table 999"):
        client.pull_sparse(999, keys)
    with pytest.raises(InvalidArgument, match="need 8 floats"):
        client.push_sparse(table, keys, np.ones((2, 3), np.float32))
    with pytest.raises(InvalidArgument, match="NaN"):
        client.push_sparse(table, keys, np.full((2, 4), np.inf, np.float32))
    with pytest.raises(InvalidArgument, match="integers"):
        client.pull_sparse(table, np.array([1.5]))
    np.testing.assert_array_equal(client.pull_sparse(table, keys), before)


def test_barrier_releases_all_workers_or_times_out(cluster):
    clients = [cluster.client() for _ in range(3)]
    futures = [c._core.barrier_async("step", 3, i, 10.0) for i, c in enumerate(clients)]
    for f in futures:
        f.wait()
    futures = [c._core.barrier_async("step", 3, i, 10.0) for i, c in enumerate(clients)]
    for f in futures:  # the same name again: a new round
        f.wait()
    # Worker 0 must wait in the server before worker 1's 0.3 s run out. An async call sent
    # first may still reach the server later on a loaded machine, so worker 0 arrives twice
    # at once: the server refuses whichever comes second, which proves the other waits.
    outcomes = queue.Queue()

    def arrive_as_worker_0(client):
        try:
            outcomes.put(client.barrier("late", 3, 0, timeout=10))
        except Exception as e:  # any error: the asserts below say which was expected
            outcomes.put(e)

    calls = [threading.Thread(target=arrive_as_worker_0, args=(c,)) for c in clients[::2]]
    for call in calls:
        call.start()
    refused = outcomes.get(timeout=30)
    assert isinstance(refused, InvalidArgument), repr(refused)
    assert "worker id 0 is already waiting in this round" in str(refused)
    with pytest.raises(Timeout, match="barrier 'late': 2 of 3 workers arrived within 300ms"):
        clients[1].barrier("late", 3, 1, timeout=0.3)
    for call in calls:
        call.join(timeout=30)
    waited = outcomes.get_nowait()
    assert isinstance(waited, Timeout), repr(waited)
    assert "barrier 'late': 1 of 3 workers arrived within 10s" in str(waited)


def test_stats_and_heartbeat(cluster):
    client = cluster.client()
    client.heartbeat()
    stats = client.stats()
    assert len(stats) == 2
    ids = sorted(t.table_id for t in stats[0])
    assert ids == sorted(t["table_id"] for t in TABLES)
    dense = next(t for t in stats[1] if t.table_id == DENSE_ID["sgd"])
    assert dense.type == "dense" and dense.rows == 2  # blocks 1 and 3 of 0..3
