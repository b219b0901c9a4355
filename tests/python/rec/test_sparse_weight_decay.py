"""Weight decay of an `nn.Embedding(sparse=True)` table, against NumPy: in one process the
penalty's gradient (coeff * row for L2, coeff * sign(row) for L1) is added once to each row the
batch read, however often it read it, and no other row changes (fleet/regularizer.py); on the
parameter servers the PS pass moves it into the table's update rule, which adds it to each row
a push updates (tests/python/e2e/test_ps_training.py: a sync job equals one process)."""

from __future__ import annotations

import numpy as np
import pytest

import fleet
import fleet as paddle
from fleet import _core
from fleet.distributed_strategy import DistributedStrategyFactory
from fleet.errors import InvalidArgument
from fleet.proto import ps_pb2
from fleet.ps import program_pass as ps_pass
from fleet.regularizer import L1Decay, L2Decay

VOCAB, DIM, LR = 12, 3, 0.1
# Row 1 is read three times, 3 and 7 once each, the others never.
IDS = np.array([[1], [3], [1], [7], [1]], dtype=np.int64)
# The loss is sum(emb * COEF), so the gradient of lookup i is COEF[i].
COEF = np.random.default_rng(3).standard_normal((len(IDS), DIM)).astype(np.float32)


def train(make_optimizer, steps=1, attr_regularizer=None):
    """The table before training and after `steps` steps on IDS."""
    main, startup = fleet.Program(), fleet.Program()
    startup.random_seed = 11
    with fleet.program_guard(main, startup):
        ids = paddle.static.data("ids", [None, 1], "int64")
        coef = paddle.static.data("coef", [None, DIM], "float32")
        emb = paddle.nn.Embedding(
            VOCAB,
            DIM,
            sparse=True,
            weight_attr=paddle.ParamAttr(
                name="table",
                initializer=paddle.nn.initializer.Uniform(-1.0, 1.0),
                regularizer=attr_regularizer,
            ),
        )
        rows = paddle.reshape(emb(ids), [-1, DIM])
        loss = paddle.sum(paddle.multiply(rows, coef))
        make_optimizer().minimize(loss)
    scope = fleet._core.Scope()
    exe = fleet.Executor(fleet.CPUPlace())
    exe.run(startup, scope=scope)
    before = np.array(scope.find_var("table").get_tensor())
    for _ in range(steps):
        exe.run(main, feed={"ids": IDS, "coef": COEF}, scope=scope)
    return before, np.array(scope.find_var("table").get_tensor())


def batch_gradient() -> dict[int, np.ndarray]:
    """The loss's gradient of each row read, duplicates summed."""
    grad: dict[int, np.ndarray] = {}
    for i, row in enumerate(IDS.ravel()):
        grad[int(row)] = grad.get(int(row), 0.0) + COEF[i]
    return grad


def sgd_reference(table, penalty, steps=1):
    table = table.copy()
    for _ in range(steps):
        for row, g in batch_gradient().items():
            table[row] -= LR * (g + penalty(table[row]))
    return table


@pytest.mark.parametrize(
    "regularizer, penalty",
    [(L2Decay(0.5), lambda w: 0.5 * w), (L1Decay(0.2), lambda w: 0.2 * np.sign(w))],
    ids=["l2", "l1"],
)
def test_sgd_decays_the_rows_read_once_each(regularizer, penalty):
    before, after = train(lambda: paddle.optimizer.SGD(LR, weight_decay=regularizer), steps=3)
    np.testing.assert_allclose(after, sgd_reference(before, penalty, 3), rtol=1e-5, atol=1e-6)
    untouched = [r for r in range(VOCAB) if r not in (1, 3, 7)]
    np.testing.assert_array_equal(after[untouched], before[untouched])


def test_a_float_weight_decay_is_l2_and_param_attr_overrides_it():
    before, after = train(lambda: paddle.optimizer.SGD(LR, weight_decay=0.25))
    np.testing.assert_allclose(
        after, sgd_reference(before, lambda w: 0.25 * w), rtol=1e-5, atol=1e-6
    )
    before, after = train(
        lambda: paddle.optimizer.SGD(LR, weight_decay=0.25), attr_regularizer=L1Decay(0.1)
    )
    np.testing.assert_allclose(
        after, sgd_reference(before, lambda w: 0.1 * np.sign(w)), rtol=1e-5, atol=1e-6
    )


def test_lazy_adam_sees_the_decayed_gradient_of_the_rows_read():
    beta1, beta2, eps, coeff, steps = 0.9, 0.999, 1e-8, 0.3, 3
    before, after = train(
        lambda: paddle.optimizer.Adam(
            LR, beta1=beta1, beta2=beta2, epsilon=eps, lazy_mode=True, weight_decay=coeff
        ),
        steps=steps,
    )
    table = before.astype(np.float64)
    m, v = np.zeros_like(table), np.zeros_like(table)
    for t in range(1, steps + 1):
        for row, g in batch_gradient().items():
            g = g + coeff * table[row]
            m[row] = beta1 * m[row] + (1 - beta1) * g
            v[row] = beta2 * v[row] + (1 - beta2) * g * g
            m_hat, v_hat = m[row] / (1 - beta1**t), v[row] / (1 - beta2**t)
            table[row] -= LR * m_hat / (np.sqrt(v_hat) + eps)
    np.testing.assert_allclose(after, table, rtol=1e-4, atol=1e-5)
    untouched = [r for r in range(VOCAB) if r not in (1, 3, 7)]
    np.testing.assert_array_equal(after[untouched], before[untouched])


@pytest.mark.parametrize("rule", ["sgd", "adagrad"])
def test_the_servers_rule_adds_the_decay_to_the_pushed_gradient(rule):
    config = ps_pb2.OptimizerConfig(learning_rate=LR, l2_decay=0.5, l1_decay=0.2)
    getattr(config, rule).SetInParent()
    server_rule = _core.ps.UpdateRule(config.SerializeToString())
    rng = np.random.default_rng(5)
    w = rng.standard_normal(DIM).astype(np.float32)
    state = server_rule.init_state(DIM)
    w_ref, acc = w.astype(np.float64), np.zeros(DIM)
    for _ in range(4):
        g = rng.standard_normal(DIM).astype(np.float32)
        server_rule.update(w, state, g)
        g = g + 0.5 * w_ref + 0.2 * np.sign(w_ref)
        if rule == "sgd":
            w_ref = w_ref - LR * g
        else:  # fluid's adagrad with epsilon 1e-6
            acc += g * g
            w_ref = w_ref - LR * g / (np.sqrt(acc) + 1e-6)
    np.testing.assert_allclose(w, w_ref, rtol=1e-5, atol=1e-6)


def test_a_negative_decay_is_refused_naming_the_field():
    config = ps_pb2.OptimizerConfig(learning_rate=LR, l2_decay=-1.0, sgd=ps_pb2.SgdConfig())
    with pytest.raises(InvalidArgument, match="l2_decay"):
        _core.ps.UpdateRule(config.SerializeToString())


def test_the_ps_pass_moves_each_tables_decay_into_its_rule():
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        ids = paddle.static.data("ids", [None, 1], "int64")
        x = paddle.static.data("x", [None, DIM], "float32")
        decayed = paddle.nn.Embedding(
            VOCAB, DIM, sparse=True, weight_attr=paddle.ParamAttr(regularizer=L1Decay(0.2))
        )
        plain = paddle.nn.Embedding(VOCAB, DIM, sparse=True)
        fc = paddle.nn.Linear(DIM, 1)
        rows = paddle.reshape(decayed(ids), [-1, DIM]) + paddle.reshape(plain(ids), [-1, DIM])
        loss = paddle.mean(fc(rows + x))
        # The optimizer's L2Decay(0.5) applies to what has no regularizer of its own.
        optimizer = paddle.optimizer.SGD(LR, weight_decay=0.5)
        _, params_grads = optimizer.minimize(loss, startup)
    plan = ps_pass.rewrite(
        main, startup, optimizer, params_grads, DistributedStrategyFactory.create_async_strategy()
    )
    rules = {t.param: t.config.optimizer for t in plan.sparse}
    assert (rules[decayed.weight.name].l1_decay, rules[decayed.weight.name].l2_decay) == (
        pytest.approx(0.2),
        0.0,
    )
    assert (rules[plain.weight.name].l1_decay, rules[plain.weight.name].l2_decay) == (
        0.0,
        pytest.approx(0.5),
    )
    # The dense parameters' decay stays on the worker, before their gradients are sent.
    assert plan.dense_config.optimizer.l2_decay == 0.0
    types = [op.type for op in main.global_block().ops]
    assert "sparse_weight_decay" not in types and "scale" in types
