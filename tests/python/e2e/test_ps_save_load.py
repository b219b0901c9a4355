"""Save and load across server processes: re-sharding onto another number of servers, delta
saves, shrink, and the count filter over RPC."""

from __future__ import annotations

import os

import numpy as np
import pytest

from fleet.errors import NotFound
from fleet.ps.checkpoint import read_manifest
from fleet.testing.ps_reference import OPTIMIZERS

pytestmark = pytest.mark.timeout(120)

SPARSE, DENSE = 1, 2
TABLES = [
    {
        "table_id": SPARSE,
        "name": "emb",
        "type": "SPARSE",
        "dim": 8,
        "num_shards": 4,
        "optimizer": OPTIMIZERS["adam"],
        "initializer": {"seed": 9, "uniform": {"low": -1, "high": 1}},
    },
    {
        "table_id": DENSE,
        "name": "fc",
        "type": "DENSE",
        "dim": 1000,
        "dense_block_size": 64,
        "optimizer": OPTIMIZERS["adagrad"],
        "initializer": {"seed": 3, "gaussian": {"std": 1}},
    },
]


def train(client, keys, steps=2, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        client.pull_sparse(SPARSE, keys)
        client.push_sparse(SPARSE, keys, rng.standard_normal((keys.size, 8)).astype(np.float32))
        client.push_dense(DENSE, rng.standard_normal(1000).astype(np.float32))


def test_save_on_two_servers_load_on_three(ps_servers, tmp_path):
    keys = np.random.default_rng(1).integers(-(2**63), 2**63 - 1, 3000, dtype=np.int64)
    two = ps_servers(TABLES, 2, tag="two")
    client2 = two.client()
    train(client2, keys)
    saved = client2.save(str(tmp_path / "ckpt"))
    assert saved == keys.size + 16  # rows + dense blocks (1000 / 64 -> 16)
    manifest = read_manifest(tmp_path / "ckpt")
    (table,) = [t for t in manifest.tables if t.table_id == SPARSE]
    (save,) = table.saves
    assert [os.path.basename(f.path) for f in save.files] == [
        "part-0-of-2.base",
        "part-1-of-2.base",
    ]

    three = ps_servers(TABLES, 3, tag="three")
    client3 = three.client()
    assert client3.load(str(tmp_path / "ckpt")) == keys.size + 16
    np.testing.assert_array_equal(
        client3.pull_sparse(SPARSE, keys), client2.pull_sparse(SPARSE, keys)
    )
    np.testing.assert_array_equal(client3.pull_dense(DENSE), client2.pull_dense(DENSE))
    rows = [next(t for t in s if t.table_id == SPARSE).rows for s in client3.stats()]
    assert sum(rows) == keys.size and min(rows) > 0
    # Optimizer state travelled with the rows: the same next step gives the same rows.
    train(client2, keys, steps=1, seed=5)
    train(client3, keys, steps=1, seed=5)
    np.testing.assert_array_equal(
        client3.pull_sparse(SPARSE, keys), client2.pull_sparse(SPARSE, keys)
    )
    np.testing.assert_array_equal(client3.pull_dense(DENSE), client2.pull_dense(DENSE))


def test_delta_save_restores_base_plus_changes(ps_servers, tmp_path):
    keys = np.arange(-500, 500, dtype=np.int64)
    source = ps_servers(TABLES, 2, tag="src")
    client = source.client()
    train(client, keys)
    assert client.save(str(tmp_path / "base"), SPARSE) == keys.size
    changed = keys[::10]
    train(client, changed, steps=1, seed=2)
    assert client.save(str(tmp_path / "delta1"), SPARSE, delta=True) == changed.size
    assert client.save(str(tmp_path / "delta2"), SPARSE, delta=True) == 0

    restored = ps_servers(TABLES, 1, tag="dst").client()
    restored.load(str(tmp_path / "base"), SPARSE)
    assert restored.load(str(tmp_path / "delta1"), SPARSE) == changed.size
    np.testing.assert_array_equal(
        restored.pull_sparse(SPARSE, keys), client.pull_sparse(SPARSE, keys)
    )
    with pytest.raises(NotFound, match="no saved parts of table 2"):
        restored.load(str(tmp_path / "base"), DENSE)


def test_shrink_and_count_filter_over_rpc(ps_servers, tmp_path):
    filtered = dict(TABLES[0], table_id=3, name="rare", count_filter={"min_count": 2})
    client = ps_servers(TABLES + [filtered], 2).client()
    keys = np.arange(100, dtype=np.int64)
    np.testing.assert_array_equal(client.pull_sparse(3, keys), np.zeros((100, 8), np.float32))
    pending = sum(next(t for t in s if t.table_id == 3).filtered_keys for s in client.stats())
    assert pending == 100
    admitted = client.pull_sparse(3, keys)
    np.testing.assert_array_equal(admitted, client.pull_sparse(SPARSE, keys))  # same init

    client.save(str(tmp_path / "a"), SPARSE)
    train(client, keys[:30], steps=1)
    client.save(str(tmp_path / "b"), SPARSE)
    assert client.shrink(SPARSE, 2) == 0
    assert client.shrink(SPARSE, 1) == 70  # untouched since before the saves "a" and "b"
    rows = sum(next(t for t in s if t.table_id == SPARSE).rows for s in client.stats())
    assert rows == 30
