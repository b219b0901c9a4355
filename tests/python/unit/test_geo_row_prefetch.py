"""GEO's prefetch of the rows a worker's next batch lacks (csrc/distributed/detail/
geo_row_prefetch.h), against a real in-process server on 127.0.0.1: a one-worker GEO dataset pass
trains bit for bit as with prefetch_sparse off (a row no other worker pushes has its server value
whenever it is pulled), the prefetch serves the batches the reader announced, and a batch it
served pulls nothing more at its step."""

from __future__ import annotations

import numpy as np
import pytest

import fleet
from fleet import _core
from fleet.proto import ps_pb2
from fleet.ps import PsClient, server_config, start_server
from tests.python.unit.ps_ops_config import communicator_config, ps_ops_tables

DIM = 3
BATCH = 4
LINES = 96
BATCHES = LINES // BATCH


def _ids(seed: int) -> np.ndarray:
    """Two ids a line: one seen in earlier lines (or not), one new in every line, so that every
    batch has rows the worker has not pulled yet."""
    rng = np.random.default_rng(seed)
    fresh = 1000 + np.arange(LINES, dtype=np.int64) * 7919
    seen = rng.integers(0, 40, size=LINES)
    return np.stack([seen, fresh], axis=1)


def _program():
    main = fleet.Program()
    block = main.global_block()
    slot = block.create_var(
        "ids", shape=[-1, 1], dtype=fleet._dtypes.to_dtype("int64"), lod_level=1
    )
    block.create_var("out", shape=[-1, DIM])
    block.create_var("grad", shape=[-1, DIM])
    block.append_op(
        "pull_sparse",
        inputs={"Ids": slot},
        outputs={"Out": "out"},
        attrs={"table_id": 1, "dim": DIM, "padding_idx": -1, "is_test": False},
    )
    # A gradient that depends on the rows pulled: a wrong or stale row changes every later value.
    block.append_op("scale", inputs={"X": "out"}, outputs={"Out": "grad"}, attrs={"scale": 0.25})
    block.append_op(
        "push_sparse",
        inputs={"Ids": slot, "Grad": "grad"},
        attrs={"table_id": 1, "dim": DIM, "padding_idx": -1},
    )
    return main, slot


def _train(tmp_path, ids: np.ndarray, prefetch: bool) -> dict:
    """One GEO worker's dataset pass on a fresh server; what the server holds afterwards."""
    path = tmp_path / f"part-{int(prefetch)}"
    path.write_text("".join(f"2 {a} {b}\n" for a, b in ids))
    tables = ps_ops_tables(DIM)
    server = start_server(server_config(0, 1, tables))
    client = PsClient([server.endpoint])
    try:
        main, slot = _program()
        dataset = fleet.DatasetFactory().create_dataset("QueueDataset")
        dataset.set_use_var([slot])
        dataset.set_batch_size(BATCH)
        dataset.set_filelist([str(path)])
        scope = _core.Scope()
        with fleet.scope_guard(scope):
            scope.var("w").get_tensor().set(np.zeros((2, 2), np.float32))
            config = communicator_config("geo", ("ids",), DIM, prefetch_sparse=prefetch)
            # No exchange within the pass, only the pass end's: an exchange in flight while the
            # trainer updates its rows rounds differently with its timing, prefetch or not.
            config.geo_steps = 10 * BATCHES
            # The worker's own optimizer of its rows (GEO trains them locally): SGD at 0.5.
            rule = ps_pb2.OptimizerConfig(learning_rate=0.5)
            rule.sgd.SetInParent()
            config.sparse = [
                _core.distributed.SparseVar(1, DIM, "emb", ["ids"], rule.SerializeToString())
            ]
            resources = _core.RuntimeResources()
            comm = _core.distributed.Communicator(config, client._core, scope)
            comm.attach(resources)
            exe = fleet.Executor(fleet.CPUPlace(), resources=resources)
            comm.start()
            result = exe.train_from_dataset(
                main, dataset, thread=1, print_period=0, fetch_list=["out"]
            )
            comm.stop()
        keys = np.unique(ids)
        return {
            "batches": result.batches,
            "out": result.fetch_sums["out"],
            "rows": client.pull_sparse(1, keys),
            "initial": _initial_rows(keys),
            "served": comm.prefetched_pulls,
            "waits": comm.trainer_waits,
        }
    finally:
        client.close()
        server.shutdown(1.0)


def _initial_rows(keys: np.ndarray) -> np.ndarray:
    """The rows `keys` start from: the initializer is a pure function of (seed, key)."""
    tables = ps_ops_tables(DIM, dense=False)
    server = start_server(server_config(0, 1, tables))
    client = PsClient([server.endpoint])
    try:
        return client.pull_sparse(1, keys)
    finally:
        client.close()
        server.shutdown(1.0)


@pytest.mark.parametrize("seed", [1, 2])
def test_one_geo_worker_trains_bit_for_bit_with_and_without_the_row_prefetch(tmp_path, seed):
    ids = _ids(seed)
    off = _train(tmp_path, ids, prefetch=False)
    on = _train(tmp_path, ids, prefetch=True)
    assert off["batches"] == on["batches"] == BATCHES
    np.testing.assert_array_equal(on["rows"], off["rows"])
    assert on["out"] == off["out"]
    # Every row trained away from its start (the local SGD step, pushed at the pass's end): the
    # comparison is not vacuous.
    assert (np.abs(off["rows"] - off["initial"]).max(axis=1) > 1e-4).all()
    # Without the switch nothing is prefetched or counted.
    assert off["served"] == 0
    assert off["waits"]["sparse_pull"] == off["waits"]["sparse_prefetch"] == 0
    # With it: the first batch has no batch before it; the others are prefetched when the reader
    # is ahead of the trainer, as it is on all but a loaded machine. Every batch has new rows, so
    # a batch that no prefetch served pulled them at its step, and a served one pulled nothing
    # more (its new rows were all absent when its window's pull started, before the window's
    # first batch, and went in at that batch).
    assert 1 <= on["served"] <= BATCHES - 1
    assert on["waits"]["sparse_pull"] == BATCHES - on["served"], on["waits"]
    assert 0 <= on["waits"]["sparse_prefetch"] <= on["served"]
