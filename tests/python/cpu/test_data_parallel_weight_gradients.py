"""Weight gradients the replicas compute by rows (BuildStrategy.split_weight_gradients): the
backward pass leaves an fc layer's weight gradient out, and each replica computes its block of
rows over the whole batch from every replica's input and output gradient. The parameters are
one process's on the whole batch, and those of the per-replica gradients reduced, to 1e-5."""

import numpy as np
import pytest

import fleet
from fleet import layers
from fleet.compiler import BuildStrategy, CompiledProgram

from .test_data_parallel import STRATEGIES, _batch, _mlp, _model, _params

_WEIGHTS = {"fc_0.w_0@GRAD", "fc_1.w_0@GRAD"}  # _model's two fc layers


def _compiled(main, loss, strategy, replicas, split, overlap=True):
    build = BuildStrategy()
    build.reduce_strategy = strategy
    build.split_weight_gradients = split
    build.overlap_reduction = overlap
    return CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=build, places=replicas
    )


def _written(desc):
    return {a for op in desc.blocks[0].ops for v in op.outputs for a in v.arguments}


@pytest.mark.parametrize("strategy", STRATEGIES, ids=["allreduce", "reduce"])
@pytest.mark.parametrize(
    "optimizer",
    [lambda: fleet.optimizer.SGD(0.5), lambda: fleet.optimizer.Adam(0.05)],
    ids=["sgd", "adam"],
)
@pytest.mark.parametrize("is_sparse", [True, False], ids=["sparse", "dense"])
@pytest.mark.parametrize("replicas", [2, 3])
@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "after"])
def test_weight_gradients_by_rows_give_one_process_parameters(
    strategy, optimizer, is_sparse, replicas, overlap
):
    """The fc weights' gradients are products (not written by the compute program), every
    replica updates a block of their rows, and the parameters and losses after 5 steps of 12
    samples are those of the gradients reduced and of one process, to 1e-5. Under AllReduce a
    fetched weight gradient is the same reduced value in every replica."""
    main, startup, loss = _model(optimizer, is_sparse=is_sparse, hidden=(16,))
    exe = fleet.Executor()
    compiled, scopes = {}, {}
    for split in (True, False):
        compiled[split] = _compiled(main, loss, strategy, replicas, split, overlap)
        scopes[split] = fleet._core.Scope()
        exe.run(startup, scope=scopes[split])
    one = fleet._core.Scope()
    exe.run(startup, scope=one)
    plan = compiled[True].plan()
    assert set(plan.products) == _WEIGHTS
    assert not _WEIGHTS & _written(plan.compute)
    assert _WEIGHTS <= set(plan.row_parts)
    assert compiled[False].plan().products == {}
    assert _WEIGHTS <= _written(compiled[False].plan().compute)
    rng = np.random.default_rng(4)
    for step in range(5):
        feed = _batch(rng, 12)
        fetch = [loss, "fc_0.w_0@GRAD"]
        a = exe.run(compiled[True], feed=feed, fetch_list=fetch, scope=scopes[True])
        b = exe.run(compiled[False], feed=feed, fetch_list=fetch, scope=scopes[False])
        (c,) = exe.run(main, feed=feed, fetch_list=[loss], scope=one)
        np.testing.assert_allclose(a[0], b[0], rtol=1e-5, atol=1e-6, err_msg=f"step {step}")
        np.testing.assert_allclose(np.mean(a[0]), c, rtol=1e-5, atol=1e-6)
        if strategy == BuildStrategy.ReduceStrategy.AllReduce:
            rows = a[1].shape[0] // replicas
            for r in range(replicas):
                block = a[1][r * rows : (r + 1) * rows]
                np.testing.assert_array_equal(block, a[1][:rows], err_msg=f"replica {r}")
                np.testing.assert_allclose(block, b[1][:rows], rtol=1e-5, atol=1e-6)
    split, whole, reference = (_params(s, main) for s in (scopes[True], scopes[False], one))
    for name, value in reference.items():
        np.testing.assert_allclose(split[name], value, rtol=1e-5, atol=1e-5, err_msg=name)
        np.testing.assert_allclose(split[name], whole[name], rtol=1e-5, atol=1e-5, err_msg=name)


def test_the_first_layer_on_fed_data_and_a_weight_read_twice():
    """The first fc of fed data loses its mul_grad altogether (no input gradient); a weight two
    muls share has its gradient summed from both, so it stays in the backward pass."""
    main, startup = fleet.Program(), fleet.Program()
    startup.random_seed = 3
    with fleet.program_guard(main, startup):
        x = layers.data("x", [8])
        label = layers.data("label", [1])
        h = layers.fc(x, 8, act="relu")
        shared = fleet.ParamAttr("shared")
        h = layers.fc(h, 8, act="relu", param_attr=shared)
        h = layers.fc(h, 8, act="relu", param_attr=shared)
        loss = layers.mean(layers.sigmoid_cross_entropy_with_logits(layers.fc(h, 1), label))
        fleet.optimizer.SGD(0.1).minimize(loss)
    compiled = _compiled(main, loss, BuildStrategy.ReduceStrategy.AllReduce, 2, True)
    plan = compiled.plan()
    assert "fc_0.w_0@GRAD" in plan.products and "shared@GRAD" not in plan.products
    assert plan.products["fc_0.w_0@GRAD"][0] == "x"
    mul_grads = [op for op in plan.compute.blocks[0].ops if op.type == "mul_grad"]
    assert all("x" not in [a for v in op.inputs for a in v.arguments] for op in mul_grads)
    exe = fleet.Executor()
    many, one = fleet._core.Scope(), fleet._core.Scope()
    exe.run(startup, scope=many)
    exe.run(startup, scope=one)
    rng = np.random.default_rng(8)
    for _ in range(4):
        feed = {
            "x": rng.standard_normal((10, 8)).astype(np.float32),
            "label": (rng.random((10, 1)) < 0.5).astype(np.float32),
        }
        exe.run(compiled, feed=feed, fetch_list=[loss], scope=many)
        exe.run(main, feed=feed, fetch_list=[loss], scope=one)
    for name, value in _params(one, main).items():
        np.testing.assert_allclose(_params(many, main)[name], value, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("strategy", STRATEGIES, ids=["allreduce", "reduce"])
def test_the_benchmarks_mlp_computes_every_weight_by_rows_during_the_backward_pass(strategy):
    """The benchmark's MLP, small: every weight's gradient is a product, the plan stays
    owner_local, so from the second step on each replica computes its blocks while the backward
    pass of the earlier layers still runs; the parameters are one process's to 1e-5."""
    main, startup, loss = _mlp()
    compiled = _compiled(main, loss, strategy, 2, True)
    assert set(compiled.plan().products) == {f"fc_{i}.w_0@GRAD" for i in range(5)}
    exe = fleet.Executor()
    many, one = fleet._core.Scope(), fleet._core.Scope()
    exe.run(startup, scope=many)
    exe.run(startup, scope=one)
    rng = np.random.default_rng(2)
    steps = 5
    for _ in range(steps):
        feed = {
            "x": rng.standard_normal((16, 24)).astype(np.float32),
            "label": (rng.random((16, 1)) < 0.5).astype(np.float32),
        }
        (a,) = exe.run(compiled, feed=feed, fetch_list=[loss], scope=many)
        (b,) = exe.run(main, feed=feed, fetch_list=[loss], scope=one)
        np.testing.assert_allclose(np.mean(a), b, rtol=1e-5, atol=1e-6)
    assert exe.data_parallel_runner(compiled, many).overlapped_steps == steps - 1
    for name, value in _params(one, main).items():
        np.testing.assert_allclose(_params(many, main)[name], value, rtol=1e-5, atol=1e-5)
