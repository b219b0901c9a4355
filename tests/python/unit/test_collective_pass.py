"""The collective pass and runtime in one process (a group of one rank, as a single-process run of
a collective script has): the ops it adds, the gradient-merge hook, train_from_dataset on one
trainer thread, and the refusal of several trainer threads."""

from __future__ import annotations

import numpy as np
import pytest

import fleet
from fleet import _core, layers
from fleet.base.distributed_optimizer import DistributedOptimizer
from fleet.base.distributed_strategy import DistributedStrategy
from fleet.base.fleet_base import Fleet
from fleet.dataset import DatasetFactory
from fleet.errors import InvalidArgument
from fleet.role_maker import UserDefinedRoleMaker


@pytest.fixture
def one_rank():
    facade = Fleet()
    facade.init(UserDefinedRoleMaker(current_id=0, worker_num=1, is_collective=True))
    yield facade
    facade.collective_runtime.close()


def _model(vocab=0):
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        label = layers.data("label", [1], dtype="float32")
        x = layers.data("x", [4], dtype="float32")
        hidden = layers.fc(x, 8, act="relu")
        logit = layers.fc(hidden, 1)
        loss = layers.mean(layers.sigmoid_cross_entropy_with_logits(logit, label))
    return main, startup, loss, [x, label]


def _minimize(facade, strategy=None, optimizer=None):
    main, startup, loss, feeds = _model()
    DistributedOptimizer(facade, optimizer or fleet.optimizer.SGD(0.1), strategy).minimize(
        loss, startup
    )
    return main, startup, loss, feeds


def _types(program, block=0):
    return [op.type for op in program.blocks[block].ops]


def test_unfused_pass_averages_every_gradient_before_the_optimizer(one_rank):
    strategy = DistributedStrategy()
    strategy.fuse_all_reduce_ops = False
    main, startup, _, _ = _minimize(one_rank, strategy)
    types = _types(main)
    assert types.count("c_allreduce_sum") == 4  # two fc layers: w and b each
    assert types.index("c_allreduce_sum") < types.index("sgd")
    assert _types(startup).count("c_broadcast") == 4
    assert "c_allreduce_sum" in str(main)


def test_fused_pass_starts_buckets_in_backward_and_waits_before_the_optimizer(one_rank):
    strategy = DistributedStrategy()
    strategy.fuse_grad_size_in_MB = 100e-6  # about 100 bytes: fc_1's w and b share a bucket
    main, _, _, _ = _minimize(one_rank, strategy)
    ops = main.global_block().ops
    types = [op.type for op in ops]
    starts = [i for i, t in enumerate(types) if t == "c_allreduce_start"]
    first_optimizer = types.index("sgd")
    assert len(starts) >= 2 and all(i < first_optimizer for i in starts)
    # A bucket starts right after the op that writes its last gradient.
    for i in starts:
        assert set(ops[i].input("X")) & set(ops[i - 1].output_names)
    # The first bucket (last layer's gradients) starts before backward has finished.
    assert any(
        op.attrs["op_role"] == 1 and op.type.endswith("_grad") for op in ops[starts[0] + 1 :]
    )


def test_gradient_merge_moves_the_update_into_a_block_run_every_k_steps(one_rank):
    strategy = DistributedStrategy()
    strategy.gradient_merge = True
    strategy.gradient_merge_configs = {"k_steps": 3, "avg": True}
    main, startup, loss, _ = _minimize(one_rank, strategy)
    assert "sgd" not in _types(main) and "c_gradient_merge_acc" in _types(main)
    assert "sgd" in _types(main, 1) and "fill_constant" in _types(main, 1)
    scope = _core.Scope()
    exe = fleet.Executor(fleet.CPUPlace(), resources=one_rank.runtime_resources)
    exe.run(startup, scope=scope)
    w = lambda: scope.find_var("fc_0.w_0").get_tensor().numpy().copy()  # noqa: E731
    before = w()
    feed = {"x": np.ones((2, 4), np.float32), "label": np.ones((2, 1), np.float32)}
    for step in range(1, 7):
        exe.run(main, feed=feed, scope=scope)
        changed = not np.array_equal(w(), before)
        assert changed == (step % 3 == 0), f"step {step}"
        before = w()
    # Running another program (startup again) does not count as a step.
    exe.run(startup, scope=scope)


def _dataset_files(tmp_path, lines=64):
    rng = np.random.default_rng(3)
    path = tmp_path / "part-0"
    rows = []
    for _ in range(lines):
        x = rng.standard_normal(4)
        rows.append(" ".join(["4", *map(str, x), "1", str(float(x.sum() > 0))]))
    path.write_text("\n".join(rows) + "\n")
    return [str(path)]


def _dataset(files, feeds, threads):
    ds = DatasetFactory().create_dataset("QueueDataset")
    ds.set_use_var(feeds)
    ds.set_batch_size(8)
    ds.set_thread(threads)
    ds.set_filelist(files)
    return ds


def test_train_from_dataset_runs_one_thread_and_refuses_more(one_rank, tmp_path):
    main, startup, loss, feeds = _minimize(one_rank)
    files = _dataset_files(tmp_path)
    scope = _core.Scope()
    exe = fleet.Executor(fleet.CPUPlace(), resources=one_rank.runtime_resources)
    exe.run(startup, scope=scope)
    before = scope.find_var("fc_0.w_0").get_tensor().numpy().copy()
    result = exe.train_from_dataset(
        main, _dataset(files, feeds, 1), scope=scope, thread=1, print_period=0
    )
    assert result.samples == 64
    assert not np.array_equal(before, scope.find_var("fc_0.w_0").get_tensor().numpy())
    with pytest.raises(InvalidArgument, match="one trainer thread per process, got thread=2"):
        exe.train_from_dataset(
            main, _dataset(files, feeds, 2), scope=scope, thread=2, print_period=0
        )


def test_collective_ops_without_a_group_say_how_to_get_one():
    main, startup, loss, _ = _model()
    fleet.optimizer.SGD(0.1).minimize(loss, startup)
    block = main.global_block()
    block._insert_op(
        len(block.ops),
        "c_allreduce_sum",
        inputs={"X": "fc_0.w_0@GRAD"},
        outputs={"Out": "fc_0.w_0@GRAD"},
    )
    scope = _core.Scope()
    exe = fleet.Executor(fleet.CPUPlace(), resources=_core.RuntimeResources())
    exe.run(startup, scope=scope)
    feed = {"x": np.ones((2, 4), np.float32), "label": np.ones((2, 1), np.float32)}
    with pytest.raises(fleet.errors.Unavailable, match="collective group.*is_collective=True"):
        exe.run(main, feed=feed, scope=scope)
