"""softmax and the classification losses: forward against NumPy float64 references, gradients
against finite differences, and bad labels named in the error."""

import numpy as np
import pytest

from fleet import _core
from fleet.errors import InvalidArgument
from fleet.testing.op_test import Seq, check_grad, make_op_desc, run_op

RNG = np.random.default_rng(11)


def _normal(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _softmax64(x: np.ndarray, axis: int = -1) -> np.ndarray:
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _log_softmax64(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def _hard_labels(n: int, c: int, ignored: int = 0, ignore_index: int = -100) -> np.ndarray:
    label = RNG.integers(0, c, size=(n, 1)).astype(np.int64)
    label[RNG.choice(n, size=ignored, replace=False)] = ignore_index
    return label


def _soft_labels(n: int, c: int) -> np.ndarray:
    return _softmax64(RNG.standard_normal((n, c)) * 2).astype(np.float32)


# ---- softmax -------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(1, 1), (4, 7), (3, 2, 5), (9,)])
def test_softmax_matches_numpy(shape):
    x = _normal(*shape) * 5
    out = run_op("softmax", {"X": x}, ["Out"])["Out"]
    np.testing.assert_allclose(out, _softmax64(x), rtol=1e-5, atol=1e-7)


def test_softmax_other_axis_and_large_inputs():
    x = _normal(3, 4, 2)
    out = run_op("softmax", {"X": x}, ["Out"], {"axis": 1})["Out"]
    np.testing.assert_allclose(out, _softmax64(x, axis=1), rtol=1e-5, atol=1e-7)
    big = np.array([[1000.0, 0.0, -1000.0]], dtype=np.float32)
    np.testing.assert_allclose(run_op("softmax", {"X": big}, ["Out"])["Out"], [[1, 0, 0]])


def test_softmax_keeps_lod():
    out = run_op("softmax", {"X": Seq(_normal(5, 3), [[0, 2, 2, 5]])}, ["Out"], raw=True)["Out"]
    assert out.lod() == [[0, 2, 2, 5]]


def test_softmax_gradient():
    check_grad("softmax", {"X": _normal(3, 4)}, wrt=["X"])
    check_grad("softmax", {"X": _normal(2, 3, 2)}, wrt=["X"], attrs={"axis": 1})


# ---- cross_entropy -------------------------------------------------------------------------


def test_cross_entropy_hard_labels_with_ignore_index():
    n, c = 12, 6
    p = _softmax64(_normal(n, c)).astype(np.float32)
    label = _hard_labels(n, c, ignored=3, ignore_index=-1)
    y = run_op("cross_entropy", {"X": p, "Label": label}, ["Y"], {"ignore_index": -1})["Y"]
    rows = np.arange(n)
    picked = p.astype(np.float64)[rows, np.clip(label[:, 0], 0, None)]
    expected = np.where(label[:, 0] == -1, 0.0, -np.log(picked))[:, None]
    assert y.shape == (n, 1)
    np.testing.assert_allclose(y, expected, rtol=1e-6)


def test_cross_entropy_soft_labels():
    n, c = 7, 5
    p = _softmax64(_normal(n, c)).astype(np.float32)
    label = _soft_labels(n, c)
    y = run_op("cross_entropy", {"X": p, "Label": label}, ["Y"], {"soft_label": True})["Y"]
    expected = -(label.astype(np.float64) * np.log(p.astype(np.float64))).sum(1, keepdims=True)
    np.testing.assert_allclose(y, expected, rtol=1e-5)


def test_cross_entropy_clips_zero_probability():
    p = np.array([[0.0, 1.0], [0.5, 0.5]], dtype=np.float32)
    y = run_op("cross_entropy", {"X": p, "Label": np.array([[0], [1]])}, ["Y"])["Y"]
    np.testing.assert_allclose(y[:, 0], [-np.log(1e-20), np.log(2)], rtol=1e-5)


def test_cross_entropy_gradients():
    p = RNG.uniform(0.2, 1.0, size=(4, 3)).astype(np.float32)
    label = np.array([[0], [2], [-100], [1]], dtype=np.int64)
    check_grad("cross_entropy", {"X": p, "Label": label}, wrt=["X"], out_slots=["Y"])
    check_grad(
        "cross_entropy",
        {"X": p, "Label": _soft_labels(4, 3)},
        wrt=["X"],
        attrs={"soft_label": True},
        out_slots=["Y"],
    )


def test_cross_entropy_names_bad_label():
    p = np.full((3, 4), 0.25, dtype=np.float32)
    with pytest.raises(InvalidArgument, match="label value 7 at row 1 is outside \\[0, 4\\)"):
        run_op("cross_entropy", {"X": p, "Label": np.array([[0], [7], [1]])}, ["Y"])
    with pytest.raises(InvalidArgument, match="hard labels must be int64"):
        run_op("cross_entropy", {"X": p, "Label": np.zeros((3, 1), np.float32)}, ["Y"])


# ---- softmax_with_cross_entropy ------------------------------------------------------------


@pytest.mark.parametrize("n,c", [(1, 2), (10, 7), (33, 3)])
def test_softmax_with_cross_entropy_hard(n, c):
    logits = _normal(n, c) * 4
    label = _hard_labels(n, c, ignored=n // 4)
    out = run_op(
        "softmax_with_cross_entropy", {"Logits": logits, "Label": label}, ["Softmax", "Loss"]
    )
    logp = _log_softmax64(logits)
    picked = logp[np.arange(n), np.clip(label[:, 0], 0, None)]
    expected = np.where(label[:, 0] == -100, 0.0, -picked)[:, None]
    np.testing.assert_allclose(out["Softmax"], np.exp(logp), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(out["Loss"], expected, rtol=1e-5, atol=1e-6)


def test_softmax_with_cross_entropy_soft_and_stable():
    logits = _normal(6, 4)
    logits[0] = [3000.0, -3000.0, 0.0, 1.0]  # exp overflows without the max shift
    label = _soft_labels(6, 4)
    loss = run_op(
        "softmax_with_cross_entropy",
        {"Logits": logits, "Label": label},
        ["Loss"],
        {"soft_label": True},
    )["Loss"]
    expected = -(label.astype(np.float64) * _log_softmax64(logits)).sum(1, keepdims=True)
    assert np.isfinite(loss).all()
    np.testing.assert_allclose(loss, expected, rtol=1e-5)


def test_softmax_with_cross_entropy_gradients():
    logits = _normal(4, 5)
    hard = np.array([[1], [4], [-100], [0]], dtype=np.int64)
    check_grad(
        "softmax_with_cross_entropy",
        {"Logits": logits, "Label": hard},
        wrt=["Logits"],
        out_slots=["Loss"],
    )
    check_grad(
        "softmax_with_cross_entropy",
        {"Logits": logits, "Label": _soft_labels(4, 5)},
        wrt=["Logits"],
        attrs={"soft_label": True},
        out_slots=["Loss"],
    )


def test_softmax_with_cross_entropy_grad_reads_kept_softmax():
    # Programs keep Softmax, and the grad op then reads it instead of recomputing it.
    logits = _normal(5, 4)
    label = _hard_labels(5, 4, ignored=1)
    fwd = make_op_desc(
        "softmax_with_cross_entropy",
        {"Logits": ["x"], "Label": ["y"]},
        {"Softmax": ["s"], "Loss": ["l"]},
        {},
    )
    (grad_bytes,) = _core.op_registry.make_grad_ops(fwd.SerializeToString())
    from fleet.proto import framework_pb2 as pb

    grad = pb.OpDesc.FromString(grad_bytes)
    assert {s.parameter for s in grad.inputs} == {"Logits", "Label", "Softmax", "Loss@GRAD"}
    softmax = run_op("softmax", {"X": logits}, ["Out"])["Out"]
    dloss = RNG.uniform(0.5, 2.0, size=(5, 1)).astype(np.float32)
    dx = run_op(
        "softmax_with_cross_entropy_grad",
        {"Logits": logits, "Label": label, "Softmax": softmax, "Loss@GRAD": dloss},
        ["Logits@GRAD"],
    )["Logits@GRAD"]
    onehot = np.zeros((5, 4))
    kept = label[:, 0] != -100
    onehot[np.arange(5)[kept], label[kept, 0]] = 1
    expected = (softmax - onehot) * dloss * kept[:, None]
    np.testing.assert_allclose(dx, expected, rtol=1e-6, atol=1e-7)


def test_softmax_with_cross_entropy_names_bad_label():
    with pytest.raises(InvalidArgument, match="label value -3 at row 0"):
        run_op(
            "softmax_with_cross_entropy",
            {"Logits": _normal(2, 3), "Label": np.array([[-3], [1]])},
            ["Loss"],
        )


# ---- sigmoid_cross_entropy_with_logits -----------------------------------------------------


def _sigmoid_ce64(x: np.ndarray, z: np.ndarray) -> np.ndarray:
    x, z = x.astype(np.float64), z.astype(np.float64)
    return np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x)))


@pytest.mark.parametrize("normalize", [False, True])
def test_sigmoid_cross_entropy_matches_numpy(normalize):
    x = _normal(8, 3) * 10
    z = RNG.uniform(0, 1, size=(8, 3)).astype(np.float32)
    z[RNG.random((8, 3)) < 0.25] = -1  # ignored
    out = run_op(
        "sigmoid_cross_entropy_with_logits",
        {"X": x, "Label": z},
        ["Out"],
        {"ignore_index": -1, "normalize": normalize},
    )["Out"]
    expected = np.where(z == -1, 0.0, _sigmoid_ce64(x, z))
    if normalize:
        expected /= max((z != -1).sum(), 1e-5)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_sigmoid_cross_entropy_is_stable_for_large_logits():
    x = np.array([[100.0, -100.0]], dtype=np.float32)
    z = np.array([[0.0, 1.0]], dtype=np.float32)
    out = run_op("sigmoid_cross_entropy_with_logits", {"X": x, "Label": z}, ["Out"])["Out"]
    np.testing.assert_allclose(out, [[100.0, 100.0]], rtol=1e-6)


def test_sigmoid_cross_entropy_gradient():
    x = _normal(3, 4)
    z = RNG.uniform(0, 1, size=(3, 4)).astype(np.float32)
    z[0, 1] = -100
    check_grad("sigmoid_cross_entropy_with_logits", {"X": x, "Label": z}, wrt=["X"])
    check_grad(
        "sigmoid_cross_entropy_with_logits",
        {"X": x, "Label": z},
        wrt=["X"],
        attrs={"normalize": True},
    )


# ---- log_loss ------------------------------------------------------------------------------


def test_log_loss_matches_numpy():
    p = RNG.uniform(0, 1, size=(10, 1)).astype(np.float32)
    labels = RNG.integers(0, 2, size=(10, 1)).astype(np.float32)
    out = run_op("log_loss", {"Predicted": p, "Labels": labels}, ["Loss"], {"epsilon": 1e-4})[
        "Loss"
    ]
    p64, l64 = p.astype(np.float64), labels.astype(np.float64)
    expected = -l64 * np.log(p64 + 1e-4) - (1 - l64) * np.log(1 - p64 + 1e-4)
    np.testing.assert_allclose(out, expected, rtol=1e-5)


def test_log_loss_gradient():
    p = RNG.uniform(0.1, 0.9, size=(5, 1)).astype(np.float32)
    labels = np.array([[0], [1], [1], [0], [0.3]], dtype=np.float32)
    check_grad(
        "log_loss", {"Predicted": p, "Labels": labels}, wrt=["Predicted"], out_slots=["Loss"]
    )


# ---- compile-time shapes -------------------------------------------------------------------

FLOAT32, INT64 = 0, 3


def test_infer_shapes_keep_batch_and_lod_level():
    desc = make_op_desc(
        "softmax_with_cross_entropy",
        {"Logits": ["x"], "Label": ["y"]},
        {"Softmax": ["s"], "Loss": ["l"]},
        {},
    )
    out = _core.op_registry.infer_shape(
        desc.SerializeToString(), {"x": ([-1, 10], FLOAT32, 1, 0), "y": ([-1, 1], INT64, 1, 0)}
    )
    assert out["s"][:3] == ([-1, 10], FLOAT32, 1)
    assert out["l"][:3] == ([-1, 1], FLOAT32, 1)
    desc = make_op_desc(
        "cross_entropy", {"X": ["x"], "Label": ["y"]}, {"Y": ["l"]}, {"soft_label": True}
    )
    with pytest.raises(InvalidArgument, match="soft labels need the class count 10"):
        _core.op_registry.infer_shape(
            desc.SerializeToString(), {"x": ([-1, 10], FLOAT32, 0, 0), "y": ([-1, 1], INT64, 0, 0)}
        )
