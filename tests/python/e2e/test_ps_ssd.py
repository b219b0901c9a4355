"""Sparse tables on the SSD tier (storage "ssd", csrc/ps/table/ssd) in real server processes:
under a memory budget far below the table's size, every pull answers exactly what an in-memory
table given the same pushes answers, checkpoints of either kind load into the other, and bad
settings stop the server with an error naming them."""

from __future__ import annotations

import numpy as np
import pytest

from fleet.testing.ps_cluster import start_servers
from tests.python.e2e.test_ps_jobs import _job

pytestmark = pytest.mark.timeout(180)

DIM = 8
MEMORY_ID, SSD_ID = 1, 2
BUDGET_MB = 0.05  # about 380 rows of dim 8 with Adagrad a server, against 20000 keys


def _dir(path):
    path.mkdir(parents=True, exist_ok=True)
    return path


def _tables(ssd_path: str, ssd_id: int = SSD_ID, memory_id: int = MEMORY_ID) -> list:
    def table(table_id: int) -> dict:
        return {
            "table_id": table_id,
            "name": "emb",
            "type": "SPARSE",
            "dim": DIM,
            "num_shards": 4,
            "optimizer": {"learning_rate": 0.05, "adagrad": {}},
            "initializer": {"seed": 3, "uniform": {"low": -0.1, "high": 0.1}},
        }

    ssd = dict(table(ssd_id), storage="ssd", memory_budget_mb=BUDGET_MB, ssd_path=ssd_path)
    return [table(memory_id), ssd]


def _zipf_batches(steps: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    return [(rng.zipf(1.1, size=64) % 20000).astype(np.int64) for _ in range(steps)]


def _pull_all(client, table_id: int, keys: np.ndarray) -> np.ndarray:
    # Requests of 64 keys: an SSD table refuses one whose rows cannot all fit its memory.
    return np.concatenate(
        [client.pull_sparse(table_id, keys[i : i + 64]) for i in range(0, len(keys), 64)]
    )


def test_values_survive_eviction_exactly_and_checkpoints_cross_kinds(tmp_path):
    with start_servers(
        _dir(tmp_path / "run"), _tables(str(tmp_path / "ssd")), num_servers=2
    ) as cluster:
        client = cluster.client()
        rng = np.random.default_rng(1)
        for step, keys in enumerate(_zipf_batches(300, seed=2)):
            memory = client.pull_sparse(MEMORY_ID, keys)
            ssd = client.pull_sparse(SSD_ID, keys)
            assert np.array_equal(memory, ssd), f"step {step}"
            grads = rng.standard_normal((keys.size, DIM)).astype(np.float32)
            client.push_sparse(MEMORY_ID, keys, grads)
            client.push_sparse(SSD_ID, keys, grads)
        touched = np.unique(np.concatenate(_zipf_batches(300, seed=2)))
        assert np.array_equal(
            _pull_all(client, MEMORY_ID, touched), _pull_all(client, SSD_ID, touched)
        )
        for server in client.stats():
            tier = next(t for t in server if t.table_id == SSD_ID).ssd
            assert tier.rows_on_disk > tier.rows_in_memory > 0
            assert tier.evictions > 0 and tier.disk_reads > 0
            assert 0 < tier.hit_rate < 1
            assert tier.bytes_written > 0 and tier.bytes_read > 0
        expected = _pull_all(client, MEMORY_ID, touched)
        client.save(str(tmp_path / "ckpt"))
    # The same checkpoint into a cluster where the kinds are swapped: table 1 (saved from
    # memory) now on the SSD tier, table 2 (saved from the SSD tier) in memory.
    swapped = _tables(str(tmp_path / "ssd2"), ssd_id=MEMORY_ID, memory_id=SSD_ID)
    with start_servers(_dir(tmp_path / "swap"), swapped, num_servers=2) as cluster:
        client = cluster.client()
        assert client.load(str(tmp_path / "ckpt")) == 2 * len(np.unique(touched))
        assert np.array_equal(_pull_all(client, MEMORY_ID, touched), expected)
        assert np.array_equal(_pull_all(client, SSD_ID, touched), expected)


def test_a_path_that_cannot_be_written_stops_the_server_naming_it(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    with pytest.raises(RuntimeError, match=str(blocker)):
        start_servers(_dir(tmp_path / "run"), _tables(str(blocker / "db")), num_servers=1)


def test_a_request_larger_than_the_budget_is_refused_naming_it(tmp_path):
    with start_servers(
        _dir(tmp_path / "run"), _tables(str(tmp_path / "ssd")), num_servers=1
    ) as cluster:
        client = cluster.client()
        with pytest.raises(Exception, match="memory_budget_mb 0.05"):
            client.pull_sparse(SSD_ID, np.arange(4000, dtype=np.int64))


def test_only_a_server_of_an_ssd_table_caps_its_malloc_arenas(tmp_path):
    """A server whose memory is bounded (an SSD table) shares one malloc arena among its
    threads, so that freed buffers do not pile up per thread (serving_allocator.h); an
    in-memory server keeps glibc's default. Each logs what it applied before serving."""
    memory_only = _tables(str(tmp_path / "unused"))[:1]
    for tag, tables, arenas in (
        ("ssd", _tables(str(tmp_path / "ssd")), 1),
        ("memory", memory_only, 0),
    ):
        with start_servers(_dir(tmp_path / tag), tables, num_servers=1, tag=tag) as cluster:
            log = cluster.logs[0].read_text()
        assert "allocator tuned for serving: AllocatorTuning(applied=True" in log, log
        assert f"arena_max={arenas})" in log, log


@pytest.mark.slow
def test_a_fleetrun_job_with_the_strategys_ssd_tables_trains_as_in_memory(tmp_path):
    """strategy.sparse_table_configs storage "ssd" reaches the servers: the job (1 server,
    2 sync workers, Adagrad) ends where the in-memory job does. Its table has 6 rows: the
    budget is the least that holds any one step's rows (2 a shard), so rows move only when a
    shard holds 3; eviction itself is checked exactly by the test above."""
    _job(tmp_path / "memory", 1, "--optimizer", "adagrad", "--out", str(tmp_path / "m.npz"))
    _job(
        tmp_path / "ssd",
        1,
        "--optimizer",
        "adagrad",
        "--ssd_budget_mb",
        "0.0032",
        "--ssd_path",
        str(tmp_path / "ssd_rows"),
        "--out",
        str(tmp_path / "s.npz"),
    )
    memory, ssd = dict(np.load(tmp_path / "m.npz")), dict(np.load(tmp_path / "s.npz"))
    assert "evictions" in ssd  # the servers' table was an SSD table
    for name in memory:
        np.testing.assert_allclose(ssd[name], memory[name], atol=1e-6, rtol=0, err_msg=name)
    assert any((tmp_path / "ssd_rows").iterdir())  # the server's database directory
