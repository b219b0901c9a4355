"""DistributedStrategy.table_optimizers: a parameter updated by its own optimizer (the wide part
of Wide & Deep, say). Checked here: validation, each sparse table's server-side rule, and the
refusal of a dense parameter whose rule the shared dense table cannot give. The training
equivalence with one process is in tests/python/e2e/test_ps_training.py (--optimizer mixed)."""

from __future__ import annotations

import pytest

import fleet
from fleet import layers
from fleet.base.distributed_optimizer import DistributedOptimizer
from fleet.base.distributed_strategy import DistributedStrategy, DistributedStrategyFactory
from fleet.base.fleet_base import Fleet
from fleet.errors import InvalidArgument
from fleet.role_maker import Role, UserDefinedRoleMaker


@pytest.fixture
def ps_worker():
    facade = Fleet()
    facade.init(
        UserDefinedRoleMaker(
            current_id=0,
            role=Role.WORKER,
            worker_num=2,
            server_endpoints=["127.0.0.1:1", "127.0.0.1:2"],
        )
    )
    return facade


def _model():
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        ids = layers.data("ids", [1], dtype="int64", lod_level=1)
        x = layers.data("x", [3])
        label = layers.data("label", [1], dtype="float32")
        wide = layers.embedding(ids, size=[100, 1], is_sparse=True, param_attr="wide_w")
        deep = layers.embedding(ids, size=[100, 4], is_sparse=True, param_attr="deep_emb")
        h = layers.concat([layers.sequence_pool(deep, "sum"), x], axis=1)
        logit = layers.elementwise_add(layers.sequence_pool(wide, "sum"), layers.fc(h, 1))
        loss = layers.mean(layers.sigmoid_cross_entropy_with_logits(logit, label))
    return main, startup, loss


def _rules(facade) -> dict:
    return {t.name: t.optimizer for t in facade.ps_plan.table_configs()}


def test_a_sparse_table_gets_its_own_server_rule(ps_worker):
    main, startup, loss = _model()
    strategy = DistributedStrategyFactory.create_async_strategy()
    strategy.table_optimizers = {"wide_w": fleet.optimizer.Adagrad(0.3, epsilon=1e-5)}
    DistributedOptimizer(ps_worker, fleet.optimizer.Adam(0.01), strategy).minimize(loss, startup)
    rules = _rules(ps_worker)
    assert rules["wide_w"].WhichOneof("rule") == "adagrad"
    assert rules["wide_w"].learning_rate == pytest.approx(0.3)
    assert rules["wide_w"].adagrad.epsilon == pytest.approx(1e-5)
    assert rules["deep_emb"].WhichOneof("rule") == "adam"
    assert rules["dense"].WhichOneof("rule") == "adam"
    assert rules["dense"].learning_rate == pytest.approx(0.01)


def test_geo_workers_apply_each_parameters_own_optimizer(ps_worker):
    # GEO workers train their own copy: sparse rows with the table's rule (the communicator's
    # local rule, from the table config), dense parameters with their optimizer ops.
    main, startup, loss = _model()
    dense = sorted(p.name for p in main.all_parameters() if p.name not in ("wide_w", "deep_emb"))
    strategy = DistributedStrategyFactory.create_geo_strategy(10)
    strategy.table_optimizers = {
        "wide_w": fleet.optimizer.Adagrad(0.3),
        dense[0]: fleet.optimizer.Adagrad(0.3),
    }
    DistributedOptimizer(ps_worker, fleet.optimizer.SGD(0.01), strategy).minimize(loss, startup)
    assert _rules(ps_worker)["wide_w"].WhichOneof("rule") == "adagrad"
    assert _rules(ps_worker)["deep_emb"].WhichOneof("rule") == "sgd"
    updates = {
        op.input("Param")[0]: op.type
        for op in main.global_block().ops
        if op.type in ("sgd", "adagrad", "adam")
    }
    assert updates == {name: "adagrad" if name == dense[0] else "sgd" for name in dense}


def test_a_dense_parameter_cannot_have_its_own_rule_on_the_servers(ps_worker):
    main, startup, loss = _model()
    dense = [p.name for p in main.all_parameters() if p.name not in ("wide_w", "deep_emb")]
    strategy = DistributedStrategyFactory.create_sync_strategy()
    strategy.table_optimizers = {dense[0]: fleet.optimizer.Adagrad(0.3)}
    with pytest.raises(InvalidArgument, match=f"{dense[0]}.*dense parameters.*wide_w"):
        DistributedOptimizer(ps_worker, fleet.optimizer.SGD(0.1), strategy).minimize(loss, startup)


def test_an_unknown_parameter_name_is_refused_with_the_trained_ones_listed(ps_worker):
    main, startup, loss = _model()
    strategy = DistributedStrategyFactory.create_async_strategy()
    strategy.table_optimizers = {"wide": fleet.optimizer.Adagrad(0.3)}
    with pytest.raises(InvalidArgument, match=r"\['wide'\].*trained parameters:.*wide_w"):
        DistributedOptimizer(ps_worker, fleet.optimizer.SGD(0.1), strategy).minimize(loss, startup)


def test_a_table_optimizer_must_be_an_optimizer_with_a_server_rule(ps_worker):
    strategy = DistributedStrategy()
    with pytest.raises(InvalidArgument, match=r"table_optimizers\['wide_w'\].*str"):
        strategy.table_optimizers = {"wide_w": "adagrad"}
    main, startup, loss = _model()
    strategy.table_optimizers = {"wide_w": fleet.optimizer.Momentum(0.1, momentum=0.9)}
    with pytest.raises(InvalidArgument, match="sparse table 'wide_w': Momentum"):
        DistributedOptimizer(ps_worker, fleet.optimizer.SGD(0.1), strategy).minimize(loss, startup)
