"""mul (fc's flattened GEMM) and matmul (2-D, batched, vectors, transposes, alpha) against NumPy
float64, their gradients, lod, compile-time shapes and shape errors."""

import numpy as np
import pytest

from fleet import _core
from fleet.errors import InvalidArgument
from fleet.testing.op_test import Seq, check_grad, make_op_desc, run_op

RNG = np.random.default_rng(5)


def _rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _infer(op_type, x_info, y_info, attrs):
    desc = make_op_desc(op_type, {"X": ["x"], "Y": ["y"]}, {"Out": ["out"]}, attrs)
    return _core.op_registry.infer_shape(desc.SerializeToString(), {"x": x_info, "y": y_info})[
        "out"
    ]


# ---- mul ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "x_shape,y_shape,xnc,ync",
    [
        ((4, 3), (3, 5), 1, 1),
        ((2, 3, 4), (4, 5), 2, 1),  # x_num_col_dims=2: [2*3, 4] @ [4, 5] -> [2, 3, 5]
        ((2, 3, 4), (12, 5), 1, 1),  # X flattened to [2, 12]
        ((3, 4), (2, 2, 6), 1, 2),  # Y flattened to [4, 6] -> Out [3, 6]
        ((2, 2, 3), (3, 2, 3), 2, 1),  # Out [2, 2, 2, 3]
    ],
)
def test_mul_matches_numpy(x_shape, y_shape, xnc, ync):
    x, y = _rand(*x_shape), _rand(*y_shape)
    out = run_op("mul", {"X": x, "Y": y}, ["Out"], {"x_num_col_dims": xnc, "y_num_col_dims": ync})[
        "Out"
    ]
    m, n = int(np.prod(x_shape[:xnc])), int(np.prod(y_shape[ync:]))
    expected = x.astype(np.float64).reshape(m, -1) @ y.astype(np.float64).reshape(-1, n)
    assert out.shape == x_shape[:xnc] + y_shape[ync:]
    np.testing.assert_allclose(out.reshape(m, n), expected, rtol=1e-5, atol=1e-5)


def test_mul_gradients():
    check_grad("mul", {"X": _rand(4, 3), "Y": _rand(3, 5)}, wrt=["X", "Y"])
    check_grad(
        "mul", {"X": _rand(2, 3, 2), "Y": _rand(2, 3)}, wrt=["X", "Y"], attrs={"x_num_col_dims": 2}
    )
    check_grad(
        "mul", {"X": _rand(3, 4), "Y": _rand(2, 2, 3)}, wrt=["X", "Y"], attrs={"y_num_col_dims": 2}
    )
    check_grad("mul", {"X": _rand(3, 4), "Y": _rand(4, 2)}, wrt=["Y"])


def test_mul_keeps_x_lod():
    out = run_op("mul", {"X": Seq(_rand(5, 3), [[0, 1, 5]]), "Y": _rand(3, 2)}, ["Out"], raw=True)[
        "Out"
    ]
    assert out.lod() == [[0, 1, 5]] and out.shape() == [5, 2]


def test_mul_mismatch_names_op_and_both_shapes():
    with pytest.raises(InvalidArgument, match=r"mul.*\[2, 3\].*\[4, 5\]"):
        run_op("mul", {"X": _rand(2, 3), "Y": _rand(4, 5)}, ["Out"])
    with pytest.raises(InvalidArgument, match=r"mul.*\[-1, 13\].*\[12, 8\]"):
        _infer("mul", ([-1, 13], 0, 0, 0), ([12, 8], 0, 0, 0), {})


def test_mul_bad_num_col_dims():
    with pytest.raises(InvalidArgument, match="x_num_col_dims=2"):
        run_op("mul", {"X": _rand(2, 3), "Y": _rand(3, 5)}, ["Out"], {"x_num_col_dims": 2})
    with pytest.raises(InvalidArgument, match="y_num_col_dims=0"):
        run_op("mul", {"X": _rand(2, 3), "Y": _rand(3, 5)}, ["Out"], {"y_num_col_dims": 0})


def test_mul_infer_shape_keeps_batch_dim():
    assert _infer("mul", ([-1, 13], 0, 1, 0), ([13, 400], 0, 0, 0), {}) == ([-1, 400], 0, 1, 0)
    assert _infer("mul", ([-1, 7, 4], 0, 0, 0), ([4, 3], 0, 0, 0), {"x_num_col_dims": 2}) == (
        [-1, 7, 3],
        0,
        0,
        0,
    )


# ---- matmul -------------------------------------------------------------------------------------


def _reference(x, y, tx, ty, alpha):
    x, y = x.astype(np.float64), y.astype(np.float64)
    if tx and x.ndim >= 2:
        x = np.swapaxes(x, -1, -2)
    if ty and y.ndim >= 2:
        y = np.swapaxes(y, -1, -2)
    out = alpha * np.matmul(x, y)
    return np.reshape(out, (1,)) if np.ndim(out) == 0 else out


MATMUL_CASES = [
    # (X shape, Y shape, transpose_X, transpose_Y)
    ((3, 4), (4, 5), False, False),
    ((4, 3), (4, 5), True, False),
    ((3, 4), (5, 4), False, True),
    ((4, 3), (5, 4), True, True),
    ((2, 3, 4), (2, 4, 5), False, False),
    ((2, 4, 3), (2, 5, 4), True, True),
    ((2, 3, 4), (2, 5, 4), False, True),
    ((2, 3, 4), (4, 5), False, False),  # one Y for every batch: folded into one GEMM
    ((2, 4, 3), (4, 5), True, False),  # same, transposed X: per-batch GEMMs
    ((3, 4), (2, 4, 5), False, False),  # one X for every batch
    ((2, 2, 3, 4), (2, 2, 4, 3), False, False),
    ((4,), (4,), False, False),  # dot product -> [1]
    ((4,), (4, 3), False, False),  # -> [3]
    ((3, 4), (4,), False, False),  # -> [3]
    ((2, 3, 4), (4,), False, False),  # -> [2, 3]
]


@pytest.mark.parametrize("x_shape,y_shape,tx,ty", MATMUL_CASES)
def test_matmul_matches_numpy(x_shape, y_shape, tx, ty):
    x, y = _rand(*x_shape), _rand(*y_shape)
    attrs = {"transpose_X": tx, "transpose_Y": ty, "alpha": 0.5}
    out = run_op("matmul", {"X": x, "Y": y}, ["Out"], attrs)["Out"]
    expected = _reference(x, y, tx, ty, 0.5)
    assert out.shape == expected.shape
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    inferred = _infer("matmul", (list(x_shape), 0, 0, 0), (list(y_shape), 0, 0, 0), attrs)
    assert tuple(inferred[0]) == expected.shape


@pytest.mark.parametrize(
    "x_shape,y_shape,tx,ty",
    [
        ((3, 2), (2, 4), False, False),
        ((2, 3), (4, 2), True, True),
        ((2, 3, 2), (2, 4, 2), False, True),
        ((2, 2, 3), (2, 2, 4), True, False),
        ((2, 3, 2), (2, 4), False, False),
        ((2, 2, 3), (2, 4), True, False),
        ((3, 2), (2, 2, 4), False, False),
        ((3,), (3, 2), False, False),
        ((2, 3), (3,), False, False),
    ],
)
def test_matmul_gradients(x_shape, y_shape, tx, ty):
    check_grad(
        "matmul",
        {"X": _rand(*x_shape), "Y": _rand(*y_shape)},
        wrt=["X", "Y"],
        attrs={"transpose_X": tx, "transpose_Y": ty, "alpha": 1.5},
    )


def test_matmul_infer_shape_keeps_batch_dim():
    assert _infer("matmul", ([-1, 3, 4], 0, 0, 0), ([4, 5], 0, 0, 0), {})[0] == [-1, 3, 5]
    assert _infer("matmul", ([-1, 4], 0, 0, 0), ([4, 5], 0, 0, 0), {})[0] == [-1, 5]
    assert _infer("matmul", ([-1, 3, 4], 0, 0, 0), ([-1, 5, 4], 0, 0, 0), {"transpose_Y": True})[
        0
    ] == [-1, 3, 5]


def test_matmul_mismatch_names_both_shapes():
    with pytest.raises(InvalidArgument, match=r"matmul.*\[2, 3\].*\[4, 5\]"):
        run_op("matmul", {"X": _rand(2, 3), "Y": _rand(4, 5)}, ["Out"])
    with pytest.raises(InvalidArgument, match=r"matmul.*\[2, 3, 4\].*\[3, 4, 5\].*batch"):
        run_op("matmul", {"X": _rand(2, 3, 4), "Y": _rand(3, 4, 5)}, ["Out"])
