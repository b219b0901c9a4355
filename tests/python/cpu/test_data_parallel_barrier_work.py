"""After the barrier that ends an overlapped step's backward pass, each replica has its last
reductions and its part of the first update phase to do. With BuildStrategy.share_barrier_work
that work is cut into tasks (a gradient's reduction and the update ops that read it), and a
replica done with its own takes the tasks another has not started instead of waiting for it at
the step's end. A task runs the same reduction and the same ops on the same variables, only
perhaps on another thread: the losses and parameters must be bit for bit those of each replica
doing its own work, and one process's to 1e-5."""

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


def _check_shared_equals_own(exe, main, loss, compiled, scopes, one, feeds):
    """Steps both runs and one process through `feeds`; the shared run's losses and parameters
    are bit for bit the other's, both overlap every step after the first, and only the shared
    run shares."""
    for step, feed in enumerate(feeds):
        (a,) = exe.run(compiled[True], feed=feed, fetch_list=[loss], scope=scopes[True])
        (b,) = exe.run(compiled[False], feed=feed, fetch_list=[loss], scope=scopes[False])
        np.testing.assert_array_equal(a, b, err_msg=f"loss of step {step}")
        exe.run(main, feed=feed, fetch_list=[loss], scope=one)
    runners = {flag: exe.data_parallel_runner(compiled[flag], scopes[flag]) for flag in compiled}
    for flag, runner in runners.items():
        assert runner.overlapped_steps == len(feeds) - 1, flag
    assert runners[True].shares_barrier_work
    assert not runners[False].shares_barrier_work
    assert runners[False].shared_barrier_tasks == 0
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
def test_shared_work_after_the_barrier_gives_the_same_parameters_bit_for_bit(
    strategy, optimizer, is_sparse, replicas, layout
):
    """Balanced owners (whole gradients), or one hidden layer whose unbalanced dense gradients
    the plan splits by rows (a block a replica); sparse embeddings split by rows under SGD and
    lazy Adam, whole under Adam; a decayed learning rate (a prelude phase, the rate computed in
    the forward pass)."""
    main, startup, loss, width = _layout_model(optimizer, is_sparse, layout)
    exe, compiled, scopes, one = _compiled_with_and_without(
        main, startup, loss, strategy, replicas, "share_barrier_work"
    )
    rng = np.random.default_rng(17)
    feeds = [_batch(rng, 12, dense_width=width) for _ in range(_STEPS)]
    _check_shared_equals_own(exe, main, loss, compiled, scopes, one, feeds)


@pytest.mark.parametrize("strategy", STRATEGIES, ids=["allreduce", "reduce"])
@pytest.mark.parametrize("even", [True, False], ids=["even", "uneven"])
@pytest.mark.parametrize("replicas", [2, 3])
def test_the_mlps_shared_work_after_the_barrier_gives_the_same_parameters_bit_for_bit(
    strategy, even, replicas
):
    """The benchmark's MLP, small, over more steps: its first layer's weight gradient is reduced
    after the barrier by its owner, with the other replica's deferred reduction beside it
    (BuildStrategy.even_barrier_work) or without (uneven, where the other replica has the most
    to take)."""
    main, startup, loss = _mlp()
    exe, compiled, scopes, one = _compiled_with_and_without(
        main, startup, loss, strategy, replicas, "share_barrier_work", even_barrier_work=even
    )
    rng = np.random.default_rng(23)
    feeds = [
        {
            "x": rng.standard_normal((18, 24)).astype(np.float32),
            "label": (rng.random((18, 1)) < 0.5).astype(np.float32),
        }
        for _ in range(20)
    ]
    _check_shared_equals_own(exe, main, loss, compiled, scopes, one, feeds)
