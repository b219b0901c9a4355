"""A per-parameter learning rate (ParamAttr(learning_rate=k)) in a parameter-server job. One
process updates such a parameter at k times the optimizer's rate. For a dense parameter the PS
pass puts k into the dense table's config (TableConfig.rate_scales: the parameter's range of the
packed table at scale k), which the servers apply in sync, async and half_async mode; GEO workers
keep the dense update ops, which apply k themselves. A sparse table with its own rate is refused,
naming it and k. The training equivalence with one process is in tests/python/e2e/
test_ps_training.py (test_sync_equals_one_process_with_the_joined_batch, *_rate) and
tests/cpp/dense_rate_scale_test.cc."""

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
def test_the_servers_get_a_dense_parameters_own_rate(ps_worker, strategy):
    main, startup, loss = _model(weight_rate=RATE)
    _minimize(ps_worker, strategy(), loss, startup)
    plan = ps_worker.ps_plan
    (w,) = [d for d in plan.dense if d.param == "w"]
    assert (w.rate, w.numel) == (RATE, 5 * 1)  # [2 (pooled emb) + 3 (x), 1]
    (scaled,) = plan.dense_config.rate_scales
    assert (scaled.offset, scaled.size, scaled.scale) == (w.offset, w.numel, RATE)
    # The bias keeps the optimizer's rate: no range of its own.
    assert [d.rate for d in plan.dense if d.param == "b"] == [1.0]


@pytest.mark.parametrize("rate", [-0.5, float("nan"), float("inf")])
def test_a_dense_rate_that_is_not_a_finite_number_at_least_0_is_refused(ps_worker, rate):
    main, startup, loss = _model(weight_rate=rate)
    with pytest.raises(InvalidArgument, match=r"dense parameter 'w'.*learning_rate=.*>= 0"):
        _minimize(ps_worker, DistributedStrategyFactory.create_async_strategy(), loss, startup)
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
    # The servers only add the workers' deltas: no rate of theirs.
    assert not ps_worker.ps_plan.dense_config.rate_scales


def test_a_sparse_tables_own_rate_is_refused_naming_the_rate(ps_worker):
    main, startup, loss = _model(embedding_rate=RATE)
    with pytest.raises(InvalidArgument, match=rf"sparse table 'emb'.*learning_rate={RATE}\)"):
        _minimize(ps_worker, DistributedStrategyFactory.create_geo_strategy(4), loss, startup)
