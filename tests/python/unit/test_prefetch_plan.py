"""The async prefetch is configured from the PS pass's plan at init_worker (issue 23): each
sparse table's id variables go into the communicator's config, and a program whose pull_sparse
ops no longer read those variables (renamed after minimize(), lookups fused differently) is
refused at init_worker, before anything connects, instead of a prefetch that silently misses."""

from __future__ import annotations

import pytest

import fleet
from fleet import layers
from fleet.distributed_strategy import DistributedStrategyFactory
from fleet.errors import InvalidArgument
from fleet.ps import program_pass as ps_pass
from fleet.ps.runtime import PsRuntime, check_pulled_ids
from fleet.role_maker import Role, UserDefinedRoleMaker


def _planned(strategy=None):
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        user = layers.data("user", [1], dtype="int64", lod_level=1)
        item = layers.data("item", [1], dtype="int64", lod_level=1)
        label = layers.data("label", [1], dtype="float32")
        pooled = [
            layers.sequence_pool(
                layers.embedding(ids, size=[100, 4], is_sparse=True, param_attr="emb"), "sum"
            )
            for ids in (user, item)
        ]
        logit = layers.fc(layers.concat(pooled, axis=1), 1)
        loss = layers.mean(layers.sigmoid_cross_entropy_with_logits(logit, label))
    optimizer = fleet.optimizer.SGD(0.1)
    _, params_grads = optimizer.minimize(loss, startup)
    strategy = strategy or DistributedStrategyFactory.create_async_strategy()
    plan = ps_pass.rewrite(main, startup, optimizer, params_grads, strategy)
    return main, plan


def _worker_runtime(plan):
    # A port nothing listens on: the check must refuse before any connection is tried.
    role = UserDefinedRoleMaker(
        current_id=0, role=Role.WORKER, worker_num=1, server_endpoints=["127.0.0.1:1"]
    )
    return PsRuntime(role, plan, fleet._core.RuntimeResources())


def test_the_plan_matches_the_program_it_came_from():
    main, plan = _planned()
    assert plan.sparse[0].id_vars == ["user", "item"]
    check_pulled_ids(plan, main)


def test_an_id_variable_renamed_after_minimize_is_refused_at_init_worker():
    main, plan = _planned()
    main.global_block()._rename_var("item", "item_renamed")
    with pytest.raises(
        InvalidArgument,
        match=r"sparse table \d+ \('emb'\) was planned to pull the ids of \['user', 'item'\], "
        r"but the program's pull_sparse ops read \['user', 'item_renamed'\]",
    ):
        _worker_runtime(plan).init_worker(timeout=1.0, program=main)


def test_lookups_fused_differently_after_minimize_are_refused_at_init_worker():
    main, plan = _planned()
    pull = next(op for op in main.global_block().ops if op.type == "pull_sparse")
    pull.inputs["Ids"] = ["user"]  # one slot of the fused pull dropped
    with pytest.raises(InvalidArgument, match=r"read \['user'\]: the program changed"):
        _worker_runtime(plan).init_worker(timeout=1.0, program=main)
