"""The Paddle 2.x static API of `import fleet as paddle` that PaddleRec models use: layers
create their parameters in the current programs, and the functions compute what NumPy does."""

from __future__ import annotations

import numpy as np
import pytest

import fleet
import fleet as paddle
import fleet.nn.functional as F


def run(main, startup, feed, fetch):
    exe = fleet.Executor(fleet.CPUPlace())
    exe.run(startup)
    return exe.run(main, feed=feed, fetch_list=fetch)


def value(name):
    return np.array(fleet.global_scope().find_var(name).get_tensor().numpy())


def test_a_layer_creates_its_parameters_in_the_current_programs():
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):

        class Net(paddle.nn.Layer):
            def __init__(self):
                super().__init__()
                self.layers = paddle.nn.LayerList([paddle.nn.Linear(4, 3), paddle.nn.ReLU()])
                self.emb = paddle.nn.Embedding(10, 2, sparse=True)

        net = Net()
    params = net.parameters()
    assert len(params) == 3  # linear weight and bias, embedding table
    names = {p.name for p in main.all_parameters()}
    assert names == {p.name for p in params}
    assert {v.name for v in startup.global_block().vars.values()} >= names
    assert [n for n, _ in net.named_parameters()][0].startswith("layers.0.")


def test_linear_and_embedding_compute_as_numpy():
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        x = paddle.static.data("x", [None, 4], "float32")
        ids = paddle.static.data("ids", [None, 1], "int64")
        ids3 = paddle.static.data("ids3", [None, 3], "int64")
        linear = paddle.nn.Linear(
            4, 3, bias_attr=paddle.ParamAttr(initializer=paddle.nn.initializer.Constant(0.5))
        )
        emb = paddle.nn.Embedding(10, 2, sparse=True)
        y, e1, e3 = linear(x), emb(ids), emb(ids3)
    assert e1.shape == (-1, 1, 2)  # 2.x keeps the trailing 1 of the ids
    assert e3.shape == (-1, 3, 2)
    xv = np.arange(8, dtype=np.float32).reshape(2, 4)
    iv = np.array([[3], [7]], dtype=np.int64)
    i3 = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int64)
    out, o1, o3 = run(main, startup, {"x": xv, "ids": iv, "ids3": i3}, [y, e1, e3])
    w, table = value(linear.weight.name), value(emb.weight.name)
    np.testing.assert_allclose(out, xv @ w + 0.5, rtol=1e-5)
    np.testing.assert_allclose(o1, table[iv], rtol=1e-6)
    np.testing.assert_allclose(o3, table[i3], rtol=1e-6)


def test_losses_and_tensor_functions_compute_as_numpy():
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        logits = paddle.static.data("logits", [None, 3], "float32")
        label = paddle.static.data("label", [None, 1], "int64")
        prob = paddle.static.data("prob", [None, 1], "float32")
        ce = F.cross_entropy(logits, label)
        bce = F.binary_cross_entropy(prob, label)
        bce_logits = F.binary_cross_entropy_with_logits(prob, label)
        u = paddle.unsqueeze(logits, axis=2)
        s = paddle.squeeze(u, axis=2)
        total = paddle.sum(logits, axis=1, keepdim=True)
        m = paddle.mean(logits)
        complement = 1 - prob
    lv = np.array([[1.0, 2.0, 0.5], [0.1, -1.0, 2.0]], dtype=np.float32)
    yv = np.array([[1], [2]], dtype=np.int64)
    pv = np.array([[0.8], [0.3]], dtype=np.float32)
    got = run(
        main,
        startup,
        {"logits": lv, "label": yv, "prob": pv},
        [ce, bce, bce_logits, u, s, total, m, complement],
    )
    soft = np.exp(lv) / np.exp(lv).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(got[0], -np.log(soft[[0, 1], yv[:, 0]]).mean(), rtol=1e-5)
    y = yv.astype(np.float32)
    np.testing.assert_allclose(
        got[1], -(y * np.log(pv) + (1 - y) * np.log(1 - pv)).mean(), rtol=1e-4
    )
    sig = 1 / (1 + np.exp(-pv))
    np.testing.assert_allclose(
        got[2], -(y * np.log(sig) + (1 - y) * np.log(1 - sig)).mean(), rtol=1e-4
    )
    assert got[3].shape == (2, 3, 1)
    np.testing.assert_allclose(got[4], lv)
    np.testing.assert_allclose(got[5], lv.sum(axis=1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(got[6], lv.mean(), rtol=1e-6)
    np.testing.assert_allclose(got[7], 1 - pv, rtol=1e-6)


def test_static_auc_returns_paddles_triple():
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        prob = paddle.static.data("prob", [None, 1], "float32")
        label = paddle.static.data("label", [None, 1], "int64")
        auc, batch_auc, stats = paddle.static.auc(paddle.concat([1 - prob, prob], axis=1), label)
    assert len(stats) == 4 and stats[2].persistable and not stats[0].persistable
    pv = np.array([[0.9], [0.2], [0.7], [0.4]], dtype=np.float32)
    yv = np.array([[1], [0], [1], [0]], dtype=np.int64)
    got = run(main, startup, {"prob": pv, "label": yv}, [auc, batch_auc])
    assert float(np.asarray(got[0]).reshape(-1)[0]) == pytest.approx(1.0)
