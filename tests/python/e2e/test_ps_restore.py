"""Servers that restore a checkpoint as they start (fleet.init_server(dirname) uses this): the
load happens before the port opens, on another number of servers than saved it (that worker
0's start-up dense values do not replace loaded ones is checked end to end in test_ps_jobs.py);
a missing checkpoint fails the start naming the directory; the values-only rows that
save_inference_model exports match the servers."""

from __future__ import annotations

import numpy as np
import pytest

from fleet.errors import NotFound
from fleet.ps import PsClient, server_config, start_server
from fleet.ps.checkpoint import part_paths
from fleet.ps.inference import read_sparse_values
from tests.python.e2e.test_ps_save_load import DENSE, SPARSE, TABLES, train

pytestmark = pytest.mark.timeout(120)


def _start(num: int, load_dirname=None) -> list:
    return [
        start_server(server_config(i, num, TABLES), load_dirname=load_dirname) for i in range(num)
    ]


def test_started_servers_serve_the_loaded_tables(ps_servers, tmp_path):
    keys = np.random.default_rng(3).integers(-(2**62), 2**62, 2000, dtype=np.int64)
    one = ps_servers(TABLES, 1, tag="one")
    client = one.client()
    train(client, keys, steps=3)
    client.save(str(tmp_path / "ckpt"))
    train(client, keys[:100], steps=1, seed=5)
    client.save(str(tmp_path / "ckpt"), delta=True)
    rows, dense = client.pull_sparse(SPARSE, keys), client.pull_dense(DENSE)
    client.close()

    servers = _start(3, str(tmp_path / "ckpt"))
    try:
        with PsClient([s.endpoint for s in servers]) as restored:
            # The first requests already see the base plus the delta.
            np.testing.assert_array_equal(restored.pull_dense(DENSE), dense)
            np.testing.assert_array_equal(restored.pull_sparse(SPARSE, keys), rows)
    finally:
        for s in servers:
            s.shutdown(1.0)


def test_a_missing_checkpoint_fails_the_start_naming_it(tmp_path):
    with pytest.raises(NotFound, match="nowhere"):
        _start(1, str(tmp_path / "nowhere"))


def test_exported_rows_are_the_servers_values(ps_servers, tmp_path):
    keys = np.random.default_rng(4).integers(-(2**62), 2**62, 500, dtype=np.int64)
    two = ps_servers(TABLES, 2, tag="two")
    client = two.client()
    train(client, keys, steps=2)
    client.save(str(tmp_path / "ckpt"))
    got_keys, got_rows = read_sparse_values(part_paths(str(tmp_path / "ckpt"), SPARSE))
    np.testing.assert_array_equal(got_keys, np.unique(keys))
    np.testing.assert_array_equal(got_rows, client.pull_sparse(SPARSE, got_keys))
    assert got_rows.shape == (np.unique(keys).size, 8)  # values only: no Adam state
