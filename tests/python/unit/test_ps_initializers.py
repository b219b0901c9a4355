"""Server-side initializers of sparse tables for fluid's Constant and TruncatedNormal: the
tables' new rows (no RPC), and the program pass choosing them from the startup program."""

from __future__ import annotations

import numpy as np
import pytest

import fleet
from fleet import _core, initializer, layers
from fleet.base.distributed_optimizer import DistributedOptimizer
from fleet.base.distributed_strategy import DistributedStrategyFactory
from fleet.base.fleet_base import Fleet
from fleet.errors import InvalidArgument
from fleet.ps import table_config
from fleet.role_maker import Role, UserDefinedRoleMaker

DIM = 8


def _table(init: dict, shards: int = 4):
    config = table_config(
        {
            "table_id": 1,
            "name": "emb",
            "type": "SPARSE",
            "dim": DIM,
            "num_shards": shards,
            "optimizer": {"learning_rate": 0.1, "sgd": {}},
            "initializer": {"seed": 9, **init},
        }
    )
    return _core.ps.SparseTable(config.SerializeToString())


def test_a_constant_table_creates_rows_of_the_value():
    rows = _table({"constant": {"value": 0.25}}).pull(np.array([3, -7, 2**40], np.int64))
    np.testing.assert_array_equal(rows, np.full((3, DIM), 0.25, np.float32))


def test_a_truncated_gaussian_table_stays_within_two_std_and_is_a_function_of_the_key():
    init = {"truncated_gaussian": {"mean": 0.5, "std": 0.1}}
    keys = np.arange(5000, dtype=np.int64) * 31
    rows = _table(init).pull(keys)
    assert rows.min() >= 0.3 - 1e-6 and rows.max() <= 0.7 + 1e-6
    assert abs(rows.mean() - 0.5) < 0.005
    assert abs(rows.std() - 0.1 * 0.8796) < 0.005  # the std of N(0, 1) cut at +-2 is 0.8796
    np.testing.assert_array_equal(
        _table(init, shards=1).pull(np.ascontiguousarray(keys[::-1])), rows[::-1]
    )


@pytest.fixture
def ps_worker():
    facade = Fleet()
    facade.init(
        UserDefinedRoleMaker(
            current_id=0, role=Role.WORKER, worker_num=1, server_endpoints=["127.0.0.1:1"]
        )
    )
    return facade


def _sparse_initializer(facade, init):
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        ids = layers.data("ids", [1], dtype="int64", lod_level=1)
        emb = layers.embedding(
            ids, size=[100, 4], is_sparse=True, param_attr=fleet.ParamAttr("emb", initializer=init)
        )
        loss = layers.mean(layers.sequence_pool(emb, "sum"))
    strategy = DistributedStrategyFactory.create_async_strategy()
    DistributedOptimizer(facade, fleet.optimizer.SGD(0.1), strategy).minimize(loss, startup)
    (table,) = [t for t in facade.ps_plan.table_configs() if t.name == "emb"]
    return table.initializer


def test_constant_becomes_a_server_initializer(ps_worker):
    config = _sparse_initializer(ps_worker, initializer.Constant(0.3))
    assert config.WhichOneof("kind") == "constant"
    assert config.constant.value == pytest.approx(0.3)


def test_truncated_normal_becomes_a_server_initializer(ps_worker):
    config = _sparse_initializer(ps_worker, initializer.TruncatedNormal(0.0, 0.02))
    assert config.WhichOneof("kind") == "truncated_gaussian"
    assert config.truncated_gaussian.std == pytest.approx(0.02)


def test_zero_stays_the_zero_initializer(ps_worker):
    assert _sparse_initializer(ps_worker, initializer.Constant(0.0)).WhichOneof("kind") == "zero"


def test_an_initializer_without_a_server_equivalent_names_the_ones_that_have_one(ps_worker):
    class Ones(initializer.Initializer):
        def __call__(self, var, block):
            block.append_op(
                "assign_value",
                outputs={"Out": var},
                attrs={"shape": list(var.shape), "dtype": var.dtype, "fp32_values": [1.0] * 400},
            )

    with pytest.raises(InvalidArgument, match="TruncatedNormal, Xavier, MSRA or Constant"):
        _sparse_initializer(ps_worker, Ones())
