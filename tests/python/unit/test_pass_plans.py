"""The program passes are pure rewrites that return what their engine needs (issue 23): the PS
pass a PsPlan, with each sparse table's id variables (the inputs of its fused pull_sparse, which
the async prefetcher is configured from at init_worker), and the collective pass a
CollectivePlan for a number of ranks, with no group and no facade involved."""

from __future__ import annotations

import fleet
from fleet import layers
from fleet.collective import program_pass as collective_pass
from fleet.distributed_strategy import DistributedStrategy, DistributedStrategyFactory
from fleet.framework import OP_ROLE_ATTR, OP_ROLE_BACKWARD, OP_ROLE_OPTIMIZE
from fleet.ps import program_pass as ps_pass


def _two_slot_model():
    """Two id slots reading one sparse table, a third slot another table, and a dense fc."""
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        user = layers.data("user", [1], dtype="int64", lod_level=1)
        item = layers.data("item", [1], dtype="int64", lod_level=1)
        tag = layers.data("tag", [1], dtype="int64", lod_level=1)
        label = layers.data("label", [1], dtype="float32")
        pooled = [
            layers.sequence_pool(
                layers.embedding(ids, size=[100, 4], is_sparse=True, param_attr=table), "sum"
            )
            for ids, table in ((user, "shared_emb"), (item, "shared_emb"), (tag, "tag_emb"))
        ]
        logit = layers.fc(layers.concat(pooled, axis=1), 1)
        loss = layers.mean(layers.sigmoid_cross_entropy_with_logits(logit, label))
    return main, startup, loss


def test_the_ps_plan_lists_each_tables_id_variables_in_pull_order():
    main, startup, loss = _two_slot_model()
    optimizer = fleet.optimizer.SGD(0.1)
    _, params_grads = optimizer.minimize(loss, startup)
    strategy = DistributedStrategyFactory.create_async_strategy()
    plan = ps_pass.rewrite(main, startup, optimizer, params_grads, strategy)
    assert [(t.param, t.id_vars) for t in plan.sparse] == [
        ("shared_emb", ["user", "item"]),
        ("tag_emb", ["tag"]),
    ]
    pulls = [op for op in main.global_block().ops if op.type == "pull_sparse"]
    assert [op.input("Ids") for op in pulls] == [t.id_vars for t in plan.sparse]
    assert plan.dense and plan.dense_config is not None


def _ps_rewritten(optimizer, strategy):
    main, startup, loss = _two_slot_model()
    _, params_grads = optimizer.minimize(loss, startup)
    ps_pass.rewrite(main, startup, optimizer, params_grads, strategy)
    return main.global_block().ops


def _send_and_after(ops):
    (at,) = [i for i, op in enumerate(ops) if op.type == "send"]
    return ops[at], ops[at + 1 :]


def test_the_dense_send_follows_the_last_dense_gradient_so_the_embedding_backward_overlaps_it():
    # In async mode the next step waits for the push the send starts: every op after it runs
    # while the push is on its way, so it goes right after its last input is written.
    ops = _ps_rewritten(
        fleet.optimizer.SGD(0.1), DistributedStrategyFactory.create_async_strategy()
    )
    send, after = _send_and_after(ops)
    assert sorted(send.input("X")) == ["fc_0.b_0@GRAD", "fc_0.w_0@GRAD"]
    assert (
        sorted(op.type for op in after)
        == ["concat_grad"] + ["push_sparse"] * 2 + ["sequence_pool_grad"] * 3
    )
    assert not any(set(send.input("X")) & set(op.output_names) for op in after)
    assert send.attrs[OP_ROLE_ATTR] == OP_ROLE_BACKWARD


def test_the_dense_send_follows_the_regularization_of_the_dense_gradients():
    # L2Decay rewrites the gradients after the backward ops: the send takes the decayed ones.
    optimizer = fleet.optimizer.SGD(0.1, regularization=fleet.regularizer.L2Decay(0.01))
    ops = _ps_rewritten(optimizer, DistributedStrategyFactory.create_sync_strategy())
    send, after = _send_and_after(ops)
    writers = [op for op in ops if set(send.input("X")) & set(op.output_names)]
    assert writers[-1].attrs[OP_ROLE_ATTR] == OP_ROLE_OPTIMIZE
    assert ops.index(send) == ops.index(writers[-1]) + 1
    assert send.attrs[OP_ROLE_ATTR] == OP_ROLE_OPTIMIZE
    assert not any(set(send.input("X")) & set(op.output_names) for op in after)


def test_the_collective_pass_needs_only_the_rank_count():
    main, startup, loss = _two_slot_model()
    optimizer = fleet.optimizer.SGD(0.1)
    _, params_grads = optimizer.minimize(loss, startup)
    strategy = DistributedStrategy()
    strategy.gradient_merge = True
    strategy.gradient_merge_configs = {"k_steps": 2, "avg": True}
    plan = collective_pass.rewrite(main, startup, optimizer, params_grads, strategy, nranks=4)
    assert plan.nranks == 4
    merge = plan.gradient_merge
    assert (merge.apply_block, merge.step_var, merge.k_steps) == (1, "gradient_merge_step", 2)
    assert merge.program_desc == main.desc().SerializeToString()
    scales = [op.attrs["scale"] for op in main.blocks[1].ops if op.type == "c_allreduce_wait"]
    assert scales and all(s == 1.0 / 8 for s in scales)  # 4 ranks, 2 micro-batches
