"""A per-parameter learning rate (ParamAttr(learning_rate=k)) in a parameter-server job. One
process updates such a parameter at k times the optimizer's rate; the servers update every dense
parameter with the dense table's one rule and rate, and a sparse table with its rule's rate, so
the PS pass refuses the parameter there, naming it and k, instead of silently dropping k. GEO
workers keep the dense update ops, which apply k, so GEO takes it. The training equivalence of a
GEO job with one process is in tests/python/e2e/test_ps_param_lr.py."""

from __future__ import annotations

import pytest

import fleet
from fleet import layers
from fleet.base.distributed_optimizer import DistributedOptimizer
from fleet.base.distributed_strategy import DistributedStrategyFactory
from fleet.base.fleet_base import Fleet
from fleet.errors import InvalidArgument
from fleet.role_maker import Role, UserDefinedRoleMaker

RATE = 0.5


@pytest.fixture
def ps_worker():
    facade = Fleet()
    facade.init(
        UserDefinedRoleMaker(
            current_id=0, role=Role.WORKER, worker_num=1, server_endpoints=["127.0.0.1:1"]
        )
    )
    return facade


def _model(weight_rate: float = 1.0, embedding_rate: float = 1.0):
    """ids -> sparse embedding, x -> fc(w, b): the weight `w` and the table `emb` with the given
    per-parameter rates, the bias `b` at the optimizer's."""
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        ids = layers.data("ids", [1], dtype="int64", lod_level=1)
        x = layers.data("x", [3])
        emb = layers.embedding(
            ids,
            size=[100, 2],
            is_sparse=True,
            param_attr=fleet.ParamAttr(name="emb", learning_rate=embedding_rate),
        )
        h = layers.concat([layers.sequence_pool(emb, "sum"), x], axis=1)
        weight = fleet.ParamAttr(name="w", learning_rate=weight_rate)
        pred = layers.fc(h, 1, param_attr=weight, bias_attr=fleet.ParamAttr(name="b"))
        loss = layers.mean(pred)
    return main, startup, loss


def _minimize(facade, strategy, loss, startup) -> None:
    DistributedOptimizer(facade, fleet.optimizer.SGD(0.1), strategy).minimize(loss, startup)


@pytest.mark.parametrize(
    "strategy",
    [
        DistributedStrategyFactory.create_sync_strategy,
        DistributedStrategyFactory.create_async_strategy,
        DistributedStrategyFactory.create_half_async_strategy,
    ],
    ids=["sync", "async", "half_async"],
)
def test_a_dense_parameters_own_rate_is_refused_where_the_servers_update_it(ps_worker, strategy):
    main, startup, loss = _model(weight_rate=RATE)
    mode = strategy().mode.value
    with pytest.raises(
        InvalidArgument,
        match=rf"dense parameter 'w'.*learning_rate={RATE}\).*in {mode} mode.*GEO",
    ):
        _minimize(ps_worker, strategy(), loss, startup)
    # The program was not half rewritten into a PS worker's: no send op, no dense plan.
    assert "send" not in [op.type for op in main.global_block().ops]
    assert ps_worker.ps_plan is None


def test_geo_workers_apply_a_dense_parameters_own_rate(ps_worker):
    main, startup, loss = _model(weight_rate=RATE)
    _minimize(ps_worker, DistributedStrategyFactory.create_geo_strategy(4), loss, startup)
    assert [d.param for d in ps_worker.ps_plan.dense] == ["w", "b"]
    ops = main.global_block().ops
    # w's update op stays on the worker and reads the optimizer's rate scaled by RATE.
    (update,) = [op for op in ops if op.type == "sgd" and op.input("Param") == ["w"]]
    (scale,) = [
        op for op in ops if op.type == "scale" and op.output("Out") == update.input("LearningRate")
    ]
    assert scale.type == "scale"
    assert scale.attrs["scale"] == pytest.approx(RATE)


def test_a_sparse_tables_own_rate_is_refused_naming_the_rate(ps_worker):
    main, startup, loss = _model(embedding_rate=RATE)
    with pytest.raises(InvalidArgument, match=rf"sparse table 'emb'.*learning_rate={RATE}\)"):
        _minimize(ps_worker, DistributedStrategyFactory.create_geo_strategy(4), loss, startup)
