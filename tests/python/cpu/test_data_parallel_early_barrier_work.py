"""A replica that finishes an overlapped step's backward pass before another waits for it at the
barrier that ends the compute program. With BuildStrategy.early_barrier_work it runs its own
tasks of the work after that barrier meanwhile (a gradient's reduction and the update ops that
read it), each once every replica is past the last compute op touching what the task touches:
no replica then reads the parameter the task writes, or writes what it reads. The same
reductions and ops on the same values, only earlier: the losses and parameters must be bit for
bit those of every task waiting for the barrier, and one process's to 1e-5.

Whether a task runs early is timing (which replica finishes first, and how far the other is);
these tests check the results either way, and that with the switch off no task runs early."""

import numpy as np
import pytest

import fleet

from .test_data_parallel import (
    STRATEGIES,
    _assert_switch_exact_and_near_one,
    _batch,
    _compiled_with_and_without,
    _decayed_adam,
    _layout_model,
    _lazy_adam,
    _mlp,
)

_STEPS = 6


def _adam():
    return fleet.optimizer.Adam(0.05)


def _mlp_feeds(seed, steps, rows, width):
    """`steps` batches of the MLP's inputs: `rows` rows of `width` features and a 0/1 label."""
    rng = np.random.default_rng(seed)
    return [
        {
            "x": rng.standard_normal((rows, width)).astype(np.float32),
            "label": (rng.random((rows, 1)) < 0.5).astype(np.float32),
        }
        for _ in range(steps)
    ]


def _check_early_equals_late(exe, main, loss, compiled, scopes, one, feeds):
    """Steps both runs and one process through `feeds`: the early run's losses and parameters
    are bit for bit the late run's, both overlap every step after the first and share the work
    after the barrier, and the late run runs no task early."""
    for step, feed in enumerate(feeds):
        (a,) = exe.run(compiled[True], feed=feed, fetch_list=[loss], scope=scopes[True])
        (b,) = exe.run(compiled[False], feed=feed, fetch_list=[loss], scope=scopes[False])
        np.testing.assert_array_equal(a, b, err_msg=f"loss of step {step}")
        exe.run(main, feed=feed, fetch_list=[loss], scope=one)
    runners = {flag: exe.data_parallel_runner(compiled[flag], scopes[flag]) for flag in compiled}
    for flag, runner in runners.items():
        assert runner.overlapped_steps == len(feeds) - 1, flag
        assert runner.shares_barrier_work, flag
    assert runners[False].early_barrier_tasks == 0
    _assert_switch_exact_and_near_one(main, scopes, one)


@pytest.mark.parametrize("strategy", STRATEGIES, ids=["allreduce", "reduce"])
@pytest.mark.parametrize(
    "optimizer",
    [lambda: fleet.optimizer.SGD(0.5), _lazy_adam, _adam, _decayed_adam],
    ids=["sgd", "lazy_adam", "adam", "decayed_adam"],
)
@pytest.mark.parametrize("is_sparse", [True, False], ids=["sparse", "dense"])
@pytest.mark.parametrize("replicas", [2, 3])
@pytest.mark.parametrize("layout", ["balanced", "dense_split"])
def test_work_run_while_waiting_at_the_barrier_gives_the_same_parameters_bit_for_bit(
    strategy, optimizer, is_sparse, replicas, layout
):
    """Balanced owners (whole gradients), or one hidden layer whose unbalanced dense gradients
    the plan splits by rows; sparse embeddings split by rows under SGD and lazy Adam, whole under
    Adam; a decayed learning rate (computed in the forward pass: an update reading it waits
    for every replica to be past that op too)."""
    main, startup, loss, width = _layout_model(optimizer, is_sparse, layout)
    exe, compiled, scopes, one = _compiled_with_and_without(
        main, startup, loss, strategy, replicas, "early_barrier_work"
    )
    rng = np.random.default_rng(29)
    feeds = [_batch(rng, 12, dense_width=width) for _ in range(_STEPS)]
    _check_early_equals_late(exe, main, loss, compiled, scopes, one, feeds)


@pytest.mark.parametrize("strategy", STRATEGIES, ids=["allreduce", "reduce"])
@pytest.mark.parametrize("even", [True, False], ids=["even", "uneven"])
@pytest.mark.parametrize("replicas", [2, 3])
def test_the_mlps_work_run_while_waiting_gives_the_same_parameters_bit_for_bit(
    strategy, even, replicas
):
    """The benchmark's MLP, small, over more steps: with even_barrier_work a replica keeps
    reductions for after the barrier that, waiting there, it may run early."""
    main, startup, loss = _mlp()
    exe, compiled, scopes, one = _compiled_with_and_without(
        main, startup, loss, strategy, replicas, "early_barrier_work", even_barrier_work=even
    )
    feeds = _mlp_feeds(31, steps=20, rows=18, width=24)
    _check_early_equals_late(exe, main, loss, compiled, scopes, one, feeds)


def test_early_work_is_off_without_shared_work():
    """early_barrier_work needs the shared tasks: with share_barrier_work off no task runs
    early, and the parameters are those of the default."""
    main, startup, loss = _mlp()
    exe, compiled, scopes, one = _compiled_with_and_without(
        main, startup, loss, STRATEGIES[0], 2, "share_barrier_work", early_barrier_work=True
    )
    for feed in _mlp_feeds(37, steps=5, rows=18, width=24):
        for flag in (True, False):
            exe.run(compiled[flag], feed=feed, fetch_list=[loss], scope=scopes[flag])
        exe.run(main, feed=feed, fetch_list=[loss], scope=one)
    unshared = exe.data_parallel_runner(compiled[False], scopes[False])
    assert not unshared.shares_barrier_work
    assert unshared.early_barrier_tasks == 0
    _assert_switch_exact_and_near_one(main, scopes, one)


@pytest.mark.parametrize("strategy", STRATEGIES, ids=["allreduce", "reduce"])
@pytest.mark.parametrize("replicas", [2, 3])
def test_a_wider_mlps_work_run_while_waiting_gives_the_same_parameters_bit_for_bit(
    strategy, replicas
):
    """Wider layers, so that a backward pass takes long enough for a replica woken late to be
    still in it when the first one arrives at the barrier (most steps run tasks early here)."""
    main, startup, loss = _mlp(width=128)
    exe, compiled, scopes, one = _compiled_with_and_without(
        main, startup, loss, strategy, replicas, "early_barrier_work"
    )
    feeds = _mlp_feeds(41, steps=12, rows=48, width=128)
    _check_early_equals_late(exe, main, loss, compiled, scopes, one, feeds)
