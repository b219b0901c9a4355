"""Autodiff: gradients of shared variables are summed, no_grad_set is honoured, sparse
gradients of shared embeddings stay sparse."""

import numpy as np
import pytest

import fleet
from fleet import layers
from fleet.errors import InvalidArgument


def _run(main, startup, feed, fetch):
    scope = fleet._core.Scope()
    exe = fleet.Executor()
    exe.run(startup, scope=scope)
    return exe.run(main, feed=feed, fetch_list=fetch, scope=scope), scope


def test_variable_used_twice_gets_the_sum_of_gradients():
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        x = layers.data("x", [3])
        h = layers.fc(
            x,
            3,
            bias_attr=False,
            param_attr=fleet.ParamAttr("w", initializer=fleet.initializer.Constant(0.5)),
        )
        y = layers.elementwise_mul(h, h)  # h used twice by one op
        z = layers.elementwise_add(y, h)  # and once more
        loss = layers.mean(z)
        params_grads = fleet.append_backward(loss)
    assert [p.name for p, _ in params_grads] == ["w"]
    data = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]], np.float32)
    (grad,), _ = _run(main, startup, {"x": data}, ["w@GRAD"])
    w = np.full((3, 3), 0.5)
    hv = data @ w
    dz_dh = (2 * hv + 1) / hv.size
    np.testing.assert_allclose(grad, data.T @ dz_dh, rtol=1e-5)
    assert any(op.type == "sum" for op in main.global_block().ops)


def test_no_grad_set_stops_gradients():
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        x = layers.data("x", [2])
        h = layers.fc(x, 2, param_attr="w1", bias_attr=False)
        out = layers.fc(h, 1, param_attr="w2", bias_attr=False)
        loss = layers.mean(out)
        params_grads = fleet.append_backward(loss, no_grad_set={"w1"})
    assert [p.name for p, _ in params_grads] == ["w2"]


def test_loss_must_be_scalar():
    main = fleet.Program()
    with fleet.program_guard(main, fleet.Program()):
        x = layers.data("x", [2])
        h = layers.fc(x, 2)
        with pytest.raises(InvalidArgument, match="must be a scalar"):
            fleet.append_backward(h)


def test_shared_sparse_embedding_gradient_is_summed_selected_rows():
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        a = layers.data("a", [1], dtype="int64", lod_level=1)
        b = layers.data("b", [1], dtype="int64", lod_level=1)
        attr = fleet.ParamAttr("table", initializer=fleet.initializer.Constant(1.0))
        ea = layers.sequence_pool(
            layers.embedding(a, [10, 4], is_sparse=True, param_attr=attr), "sum"
        )
        eb = layers.sequence_pool(
            layers.embedding(b, [10, 4], is_sparse=True, param_attr=attr), "sum"
        )
        loss = layers.mean(layers.elementwise_add(ea, eb))
        fleet.append_backward(loss)
    feed = {"a": np.array([[1], [2]], np.int64), "b": np.array([[2], [7]], np.int64)}
    _, scope = _run(main, startup, feed, [])
    grad = scope.find_var("table@GRAD")
    assert grad.is_selected_rows()
    dense = grad.get_selected_rows().to_dense()
    expected = np.zeros((10, 4), np.float32)
    for row in (1, 2, 2, 7):
        expected[row] += 1.0 / 8
    np.testing.assert_allclose(dense, expected, rtol=1e-6)
