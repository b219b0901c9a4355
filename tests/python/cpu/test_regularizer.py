"""Weight decay (fleet.regularizer): the update sees grad + coeff * param (L2) or
grad + coeff * sign(param) (L1); a ParamAttr's regularizer overrides the optimizer's."""

import numpy as np
import pytest

import fleet
from fleet import layers
from fleet.errors import InvalidArgument
from fleet.regularizer import L1Decay, L2Decay

LR = 0.1


def one_sgd_step(optimizer_reg=None, w_reg=None, b_reg=None):
    """w and b after one SGD step on a fixed batch, and their initial values."""
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((16, 3)).astype(np.float32)
    ys = rng.standard_normal((16, 1)).astype(np.float32)
    main, startup = fleet.Program(), fleet.Program()
    startup.random_seed = 5
    with fleet.program_guard(main, startup):
        x, y = layers.data("x", [3]), layers.data("y", [1])
        pred = layers.fc(
            x,
            1,
            param_attr=fleet.ParamAttr(name="w", regularizer=w_reg),
            bias_attr=fleet.ParamAttr(name="b", regularizer=b_reg),
        )
        diff = layers.elementwise_sub(pred, y)
        loss = layers.mean(layers.elementwise_mul(diff, diff))
        fleet.optimizer.SGD(LR, regularization=optimizer_reg).minimize(loss)
    scope = fleet._core.Scope()
    exe = fleet.Executor()
    exe.run(startup, scope=scope)
    before = {n: np.array(scope.find_var(n).get_tensor()) for n in ("w", "b")}
    exe.run(main, feed={"x": xs, "y": ys}, scope=scope)
    after = {n: np.array(scope.find_var(n).get_tensor()) for n in ("w", "b")}
    return before, after


def test_l2_decay_adds_coeff_times_param_to_every_gradient():
    before, plain = one_sgd_step()
    _, decayed = one_sgd_step(optimizer_reg=L2Decay(0.5))
    for n in ("w", "b"):
        np.testing.assert_allclose(
            decayed[n], plain[n] - LR * 0.5 * before[n], rtol=1e-5, atol=1e-7
        )


def test_l1_decay_adds_coeff_times_sign():
    before, plain = one_sgd_step()
    _, decayed = one_sgd_step(optimizer_reg=L1Decay(0.2))
    for n in ("w", "b"):
        np.testing.assert_allclose(
            decayed[n], plain[n] - LR * 0.2 * np.sign(before[n]), rtol=1e-5, atol=1e-7
        )


def test_param_attr_regularizer_overrides_the_optimizers():
    before, plain = one_sgd_step()
    _, mixed = one_sgd_step(optimizer_reg=L2Decay(0.5), w_reg=L2Decay(2.0))
    np.testing.assert_allclose(
        mixed["w"], plain["w"] - LR * 2.0 * before["w"], rtol=1e-5, atol=1e-7
    )
    np.testing.assert_allclose(
        mixed["b"], plain["b"] - LR * 0.5 * before["b"], rtol=1e-5, atol=1e-7
    )


def test_sparse_gradient_is_decayed_on_the_rows_read_only():
    """is_sparse=True: coeff * row is added once to each row the batch read (row 2 twice);
    the other rows keep their values (tests/python/rec/test_sparse_weight_decay.py has more)."""
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        ids = layers.data("ids", [1], dtype="int64")
        emb = layers.embedding(ids, [10, 4], is_sparse=True, param_attr="emb_table")
        loss = layers.reduce_sum(emb)
        fleet.optimizer.SGD(LR, regularization=L2Decay(0.5)).minimize(loss)
    scope = fleet._core.Scope()
    exe = fleet.Executor()
    exe.run(startup, scope=scope)
    before = np.array(scope.find_var("emb_table").get_tensor())
    exe.run(main, feed={"ids": np.array([[2], [5], [2]], np.int64)}, scope=scope)
    after = np.array(scope.find_var("emb_table").get_tensor())
    expected = before.copy()
    expected[2] -= LR * (2.0 + 0.5 * before[2])
    expected[5] -= LR * (1.0 + 0.5 * before[5])
    np.testing.assert_allclose(after, expected, rtol=1e-5, atol=1e-7)


def test_bad_regularizers_are_rejected():
    with pytest.raises(InvalidArgument, match="SGD regularization must be None or"):
        fleet.optimizer.SGD(LR, regularization=1e-4)
    with pytest.raises(ValueError, match="regularization_coeff must be >= 0"):
        L2Decay(-1.0)
    with fleet.program_guard(fleet.Program(), fleet.Program()):
        x = layers.data("x", [3])
        with pytest.raises(InvalidArgument, match="ParamAttr.regularizer of 'w'"):
            layers.fc(x, 1, param_attr=fleet.ParamAttr(name="w", regularizer="l2"))
