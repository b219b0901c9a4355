"""A learning-rate schedule on the parameter servers: tables step it once per push (no RPC here;
tests/python/e2e/test_ps_lr_schedule.py pushes over gRPC), and the program pass sends a fluid
schedule to the servers with the rule (in GEO mode to the workers' local rules; refused for a rate
other ops compute)."""

from __future__ import annotations

import numpy as np
import pytest

import fleet
from fleet import _core, layers
from fleet.base.distributed_optimizer import DistributedOptimizer
from fleet.base.distributed_strategy import DistributedStrategyFactory
from fleet.base.fleet_base import Fleet
from fleet.errors import InvalidArgument
from fleet.ps import table_config
from fleet.role_maker import Role, UserDefinedRoleMaker

EXPONENTIAL = {
    "name": "exponential_decay",
    "learning_rate": 0.1,
    "decay_steps": 2,
    "decay_rate": 0.5,
}


def exponential_rate(step: int) -> float:
    return 0.1 * 0.5 ** (step / 2)


def _config(kind: str, schedule: dict, rule: dict | None = None):
    return table_config(
        {
            "table_id": 1,
            "name": "t",
            "type": kind,
            "dim": 3,
            "optimizer": {"learning_rate": 0.1, **(rule or {"sgd": {}}), "schedule": schedule},
            "initializer": {"zero": {}},
        }
    ).SerializeToString()


def test_a_dense_table_steps_the_schedule_once_per_push():
    table = _core.ps.DenseTable(_config("DENSE", EXPONENTIAL))
    for step in range(5):
        before = table.pull()
        table.push(np.ones(3, np.float32))
        np.testing.assert_allclose(before - table.pull(), exponential_rate(step), rtol=1e-5)
    # A delta push (GEO, a restore) is no step.
    table.push(np.ones(3, np.float32), True)
    before = table.pull()
    table.push(np.ones(3, np.float32))
    np.testing.assert_allclose(before - table.pull(), exponential_rate(5), rtol=1e-5)


def test_a_sparse_table_steps_the_schedule_once_per_push_whatever_the_keys():
    schedule = {"name": "piecewise_decay", "boundaries": [2, 3], "values": [0.5, 0.25, 0.125]}
    table = _core.ps.SparseTable(_config("SPARSE", schedule))
    keys = np.array([7, 9], np.int64)
    total = np.zeros((2, 3), np.float32)
    for rate in [0.5, 0.5, 0.25, 0.125]:
        table.push(keys, np.ones((2, 3), np.float32))
        total -= rate
    np.testing.assert_allclose(table.pull(keys), total, rtol=1e-6)


def test_noam_counts_from_one_and_adam_reads_the_rate():
    schedule = {"name": "noam_decay", "d_model": 16, "warmup_steps": 2, "learning_rate": 1.0}
    schedule["begin"] = 1
    adam = {"adam": {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8}}
    table = _core.ps.DenseTable(_config("DENSE", schedule, adam))
    before = table.pull()
    table.push(np.ones(3, np.float32))
    # Adam's first step moves by the rate (m1_hat / sqrt(m2_hat) = 1).
    want = 16**-0.5 * min(1.0, 1 * 2**-1.5)
    np.testing.assert_allclose(before - table.pull(), want, rtol=1e-4)


def test_a_bad_schedule_is_refused_naming_the_field():
    bad = {"name": "exponential_decay", "learning_rate": 0.1, "decay_rate": 0.5}
    with pytest.raises(InvalidArgument, match="schedule: exponential_decay: decay_steps must be"):
        _core.ps.DenseTable(_config("DENSE", bad))
    with pytest.raises(InvalidArgument, match="unknown schedule 'linear'"):
        _core.ps.DenseTable(_config("DENSE", {"name": "linear"}))


# ---- the program pass -------------------------------------------------------------------------


def _worker():
    facade = Fleet()
    facade.init(
        UserDefinedRoleMaker(
            current_id=0, role=Role.WORKER, worker_num=2, server_endpoints=["127.0.0.1:1"]
        )
    )
    return facade


def _minimize(strategy, make_lr):
    facade = _worker()
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        ids = layers.data("ids", [1], dtype="int64", lod_level=1)
        emb = layers.embedding(ids, size=[100, 4], is_sparse=True, param_attr="emb")
        loss = layers.mean(layers.fc(layers.sequence_pool(emb, "sum"), 1))
        lr = make_lr()
    DistributedOptimizer(facade, fleet.optimizer.Adam(lr), strategy).minimize(loss, startup)
    return {t.name: t.optimizer for t in facade.ps_plan.table_configs()}


def test_the_pass_gives_every_table_the_schedule():
    rules = _minimize(
        DistributedStrategyFactory.create_async_strategy(),
        lambda: layers.exponential_decay(0.1, decay_steps=100, decay_rate=0.9, staircase=True),
    )
    for rule in rules.values():
        assert rule.WhichOneof("rule") == "adam"
        assert rule.learning_rate == pytest.approx(0.1)
        s = rule.schedule
        assert (s.name, s.decay_steps, s.staircase, s.begin) == ("exponential_decay", 100, True, 0)
        assert s.decay_rate == pytest.approx(0.9)
    noam = _minimize(
        DistributedStrategyFactory.create_sync_strategy(),
        lambda: layers.noam_decay(512, warmup_steps=4000),
    )
    assert noam["emb"].schedule.begin == 1 and noam["emb"].schedule.d_model == 512
    piecewise = _minimize(
        DistributedStrategyFactory.create_async_strategy(),
        lambda: layers.piecewise_decay([10, 20], [0.3, 0.2, 0.1]),
    )
    assert list(piecewise["dense"].schedule.boundaries) == [10, 20]
    assert piecewise["dense"].learning_rate == pytest.approx(0.3)


def test_geo_takes_a_schedule_and_the_pass_refuses_a_rate_other_ops_compute():
    # In GEO the sparse table's rule (with its schedule) is the worker's local rule; the servers
    # only add deltas.
    geo = _minimize(
        DistributedStrategyFactory.create_geo_strategy(4),
        lambda: layers.cosine_decay(0.1, step_each_epoch=10, epochs=3),
    )
    assert geo["emb"].schedule.name == "cosine_decay"
    assert geo["emb"].schedule.step_each_epoch == 10

    def computed():
        return layers.scale(layers.fill_constant([1], "float32", 0.1), 0.5)

    with pytest.raises(InvalidArgument, match=r"computed by \['scale'\]"):
        _minimize(DistributedStrategyFactory.create_async_strategy(), computed)
