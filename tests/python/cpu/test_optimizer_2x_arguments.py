"""paddle.optimizer's 2.x arguments, as PaddleRec models pass them: `weight_decay=` (a float is an
L2Decay coefficient, or a regularizer) and `parameters=` (the parameters minimize updates); and
the public `learning_rate` the parameter-server pass reads."""

from __future__ import annotations

import numpy as np
import pytest

import fleet
from fleet import layers
from fleet.errors import InvalidArgument
from fleet.regularizer import L1Decay, L2Decay

LR = 0.1


def _linear_regression():
    main, startup = fleet.Program(), fleet.Program()
    startup.random_seed = 5
    with fleet.program_guard(main, startup):
        x, y = layers.data("x", [3]), layers.data("y", [1])
        linear = fleet.nn.Linear(
            3, 1, weight_attr=fleet.ParamAttr(name="w"), bias_attr=fleet.ParamAttr(name="b")
        )
        diff = layers.elementwise_sub(linear(x), y)
        loss = layers.mean(layers.elementwise_mul(diff, diff))
    return main, startup, loss, linear


def one_step(make_optimizer):
    """w and b before and after one step of `make_optimizer(linear)` on a fixed batch."""
    rng = np.random.default_rng(0)
    feed = {
        "x": rng.standard_normal((16, 3)).astype(np.float32),
        "y": rng.standard_normal((16, 1)).astype(np.float32),
    }
    main, startup, loss, linear = _linear_regression()
    with fleet.program_guard(main, startup):
        make_optimizer(linear).minimize(loss)
    scope = fleet._core.Scope()
    exe = fleet.Executor()
    exe.run(startup, scope=scope)
    before = {n: np.array(scope.find_var(n).get_tensor()) for n in ("w", "b")}
    exe.run(main, feed=feed, scope=scope)
    after = {n: np.array(scope.find_var(n).get_tensor()) for n in ("w", "b")}
    return before, after


def test_a_float_weight_decay_is_l2_decay_of_that_coefficient():
    before, plain = one_step(lambda _: fleet.optimizer.SGD(learning_rate=LR))
    _, decayed = one_step(lambda _: fleet.optimizer.SGD(learning_rate=LR, weight_decay=0.5))
    _, spelled_1x = one_step(lambda _: fleet.optimizer.SGD(LR, regularization=L2Decay(0.5)))
    for n in ("w", "b"):
        np.testing.assert_allclose(decayed[n], plain[n] - LR * 0.5 * before[n], rtol=1e-5)
        np.testing.assert_array_equal(decayed[n], spelled_1x[n])


def test_a_regularizer_as_weight_decay_is_applied():
    before, plain = one_step(lambda _: fleet.optimizer.SGD(learning_rate=LR))
    _, decayed = one_step(lambda _: fleet.optimizer.SGD(LR, weight_decay=L1Decay(0.2)))
    np.testing.assert_allclose(
        decayed["w"], plain["w"] - LR * 0.2 * np.sign(before["w"]), rtol=1e-5
    )


def test_adam_and_adagrad_take_the_2x_keywords():
    """The rank models' optimizers, built as PaddleRec 2.x's static models build them."""
    for make in (
        lambda m: fleet.optimizer.Adam(
            learning_rate=LR, parameters=m.parameters(), weight_decay=1e-4, lazy_mode=True
        ),
        lambda m: fleet.optimizer.Adagrad(
            learning_rate=LR, parameters=m.parameters(), weight_decay=1e-4
        ),
    ):
        before, after = one_step(make)
        assert not np.array_equal(before["w"], after["w"])


def test_parameters_limit_what_minimize_updates():
    before, after = one_step(
        lambda linear: fleet.optimizer.SGD(learning_rate=LR, parameters=[linear.weight])
    )
    assert not np.array_equal(before["w"], after["w"])
    np.testing.assert_array_equal(before["b"], after["b"])


def test_an_explicit_parameter_list_of_minimize_wins_over_parameters():
    main, startup, loss, linear = _linear_regression()
    with fleet.program_guard(main, startup):
        opt = fleet.optimizer.SGD(LR, parameters=[linear.weight])
        _, params_grads = opt.minimize(loss, parameter_list=[linear.bias])
    assert [p.name for p, _ in params_grads] == ["b"]


def test_regularization_and_weight_decay_together_are_refused():
    with pytest.raises(InvalidArgument, match="Adam: regularization=.*weight_decay=0.1"):
        fleet.optimizer.Adam(0.1, regularization=L2Decay(0.1), weight_decay=0.1)


def test_weight_decay_of_another_type_is_refused_naming_it():
    with pytest.raises(InvalidArgument, match="SGD regularization.*str"):
        fleet.optimizer.SGD(0.1, weight_decay="l2")


def test_learning_rate_is_public_a_number_or_the_schedule_variable():
    assert fleet.optimizer.SGD(0.25).learning_rate == 0.25
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        decayed = layers.exponential_decay(0.1, decay_steps=10, decay_rate=0.5)
    assert fleet.optimizer.SGD(decayed).learning_rate is decayed
