"""The tables of conftest.py's cluster fixture, and the communicator config the PS op tests
(test_ps_ops.py, test_ps_ops_slots.py, test_geo_row_prefetch.py) attach to an executor: worker 0
of 1, the dense table 0 as variable "w", and the sparse table 1 read through the id variables
`ids`."""

from __future__ import annotations

from fleet import _core


def ps_ops_tables(row_dim: int, *, dense: bool = True) -> list[dict]:
    """A sparse table 1 (rows of `row_dim` floats, SGD at rate 1, seeded uniform rows: a pure
    function of (seed, id)) and, with `dense`, a dense table 0 (4 floats, SGD at 0.5, zeros)."""
    tables = [
        {
            "table_id": 1,
            "type": "SPARSE",
            "dim": row_dim,
            "optimizer": {"learning_rate": 1.0, "sgd": {}},
            "initializer": {"seed": 5, "uniform": {"low": -1, "high": 1}},
        }
    ]
    if dense:
        tables.append(
            {
                "table_id": 0,
                "type": "DENSE",
                "dim": 4,
                "optimizer": {"learning_rate": 0.5, "sgd": {}},
                "initializer": {"zero": {}},
            }
        )
    return tables


def communicator_config(
    mode: str,
    ids,
    row_dim: int,
    *,
    max_dense_staleness: int = 0,
    prefetch_sparse: bool = True,
    send_queue_size: int = 4,
    max_merge_var_num: int = 1,
    send_wait_times: int = 0,
):
    config = _core.distributed.CommunicatorConfig()
    config.mode = getattr(_core.distributed.PsMode, mode.upper())
    config.worker_id = 0
    config.num_workers = 1
    config.dense_table_id = 0
    config.dense = [_core.distributed.DenseVar("w", "w@GRAD", 0, 4)]
    config.sparse = [_core.distributed.SparseVar(1, row_dim, "emb", list(ids))]
    config.send_queue_size = send_queue_size
    config.max_merge_var_num = max_merge_var_num
    config.send_wait_times = send_wait_times
    config.thread_pool_size = 1
    config.independent_recv = False
    config.max_dense_staleness = max_dense_staleness
    config.prefetch_sparse = prefetch_sparse
    config.geo_steps = 1
    config.step_timeout_s = 10.0
    return config
