"""elementwise_add / _sub / _mul / _div: Paddle's axis broadcasting against NumPy float64, the
gradients of both inputs, lod, compile-time shapes and the errors for shapes that do not fit."""

import numpy as np
import pytest

from fleet import _core
from fleet.errors import InvalidArgument
from fleet.testing.op_test import Seq, check_grad, make_op_desc, run_op

RNG = np.random.default_rng(11)
OPS = {
    "elementwise_add": np.add,
    "elementwise_sub": np.subtract,
    "elementwise_mul": np.multiply,
    "elementwise_div": np.divide,
}
# (X shape, Y shape, axis)
CASES = [
    ((3, 4), (3, 4), -1),  # same shape
    ((5, 4), (4,), -1),  # fc bias, aligned to the end
    ((5, 4), (4,), 1),  # fc bias as layers.fc writes it
    ((2, 3, 4), (3,), 1),  # middle run
    ((2, 3, 4), (2,), 0),  # leading run
    ((2, 3, 4), (3, 4), -1),  # trailing run of two
    ((2, 3, 4), (3, 1), 1),  # a 1 inside the run broadcasts
    ((2, 3, 4, 5), (1, 4), 1),  # leading 1 inside the run
    ((2, 3), (1,), -1),  # scalar-like
    ((2, 3, 4), (2, 3, 4), 0),  # same shape, explicit axis
]


def _padded(x_shape, y_shape, axis):
    start = len(x_shape) - len(y_shape) if axis == -1 else axis
    return (1,) * start + tuple(y_shape) + (1,) * (len(x_shape) - start - len(y_shape))


def _inputs(x_shape, y_shape):
    x = RNG.standard_normal(x_shape).astype(np.float32)
    # Away from zero so that division is well conditioned.
    y = (RNG.uniform(0.5, 1.5, y_shape) * RNG.choice([-1, 1], y_shape)).astype(np.float32)
    return x, y


@pytest.mark.parametrize("op_type", sorted(OPS))
@pytest.mark.parametrize("x_shape,y_shape,axis", CASES)
def test_forward_matches_numpy(op_type, x_shape, y_shape, axis):
    x, y = _inputs(x_shape, y_shape)
    out = run_op(op_type, {"X": x, "Y": y}, ["Out"], {"axis": axis})["Out"]
    expected = OPS[op_type](
        x.astype(np.float64), y.astype(np.float64).reshape(_padded(x_shape, y_shape, axis))
    )
    assert out.shape == x.shape and out.dtype == np.float32
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)


def test_default_axis_is_minus_one():
    x, y = _inputs((3, 2, 5), (2, 5))
    out = run_op("elementwise_sub", {"X": x, "Y": y}, ["Out"])["Out"]
    np.testing.assert_allclose(out, x - y[None], rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float64])
def test_other_dtypes_forward(dtype):
    x = RNG.integers(1, 50, (4, 3)).astype(dtype)
    y = RNG.integers(1, 7, (3,)).astype(dtype)
    for op_type, fn in OPS.items():
        out = run_op(op_type, {"X": x, "Y": y}, ["Out"])["Out"]
        assert out.dtype == dtype
        expected = x // y if op_type == "elementwise_div" and dtype != np.float64 else fn(x, y)
        np.testing.assert_allclose(out, expected.astype(dtype), rtol=1e-12)


def test_integer_division_edge_cases():
    x = np.array([np.iinfo(np.int64).min, 7, -7], dtype=np.int64)
    out = run_op("elementwise_div", {"X": x, "Y": np.array([-1], np.int64)}, ["Out"])["Out"]
    np.testing.assert_array_equal(out, [np.iinfo(np.int64).min, -7, 7])  # min / -1 wraps


def test_integer_division_by_zero_is_an_error():
    x = np.ones((2, 2), dtype=np.int64)
    y = np.array([1, 0], dtype=np.int64)
    with pytest.raises(InvalidArgument, match="division by zero"):
        run_op("elementwise_div", {"X": x, "Y": y}, ["Out"])


@pytest.mark.parametrize(
    "x_shape,y_shape,axis",
    [((3, 4), (3, 4), -1), ((3, 4), (4,), 1), ((2, 3, 2), (3,), 1), ((2, 3, 2), (3, 1), 1)],
)
def test_gradients(x_shape, y_shape, axis):
    attrs = {"axis": axis}
    check_grad(
        "elementwise_add", dict(zip("XY", _inputs(x_shape, y_shape))), wrt=["X", "Y"], attrs=attrs
    )
    check_grad(
        "elementwise_sub", dict(zip("XY", _inputs(x_shape, y_shape))), wrt=["X", "Y"], attrs=attrs
    )
    check_grad(
        "elementwise_mul", dict(zip("XY", _inputs(x_shape, y_shape))), wrt=["X", "Y"], attrs=attrs
    )
    check_grad(
        "elementwise_div", dict(zip("XY", _inputs(x_shape, y_shape))), wrt=["X", "Y"], attrs=attrs
    )


def test_gradient_of_one_input_only():
    x, y = _inputs((4, 3), (3,))
    check_grad("elementwise_mul", {"X": x, "Y": y}, wrt=["Y"])


def test_out_keeps_x_lod():
    x, y = _inputs((5, 2), (2,))
    out = run_op("elementwise_add", {"X": Seq(x, [[0, 2, 5]]), "Y": y}, ["Out"], raw=True)["Out"]
    assert out.lod() == [[0, 2, 5]]


def test_shape_mismatch_names_op_and_both_shapes():
    x = np.ones((2, 3), dtype=np.float32)
    y = np.ones((4,), dtype=np.float32)
    with pytest.raises(InvalidArgument, match=r"elementwise_add.*\[4\].*\[2, 3\]"):
        run_op("elementwise_add", {"X": x, "Y": y}, ["Out"])
    with pytest.raises(InvalidArgument, match=r"elementwise_mul.*\[2, 3\].*axis=0"):
        run_op("elementwise_mul", {"X": x, "Y": np.ones((3,), np.float32)}, ["Out"], {"axis": 0})


def test_bad_axis_and_rank_and_dtype():
    x = np.ones((2, 3), dtype=np.float32)
    with pytest.raises(InvalidArgument, match="axis=2"):
        run_op("elementwise_add", {"X": x, "Y": np.ones((3,), np.float32)}, ["Out"], {"axis": 2})
    with pytest.raises(InvalidArgument, match="more dimensions"):
        run_op("elementwise_add", {"X": np.ones((3,), np.float32), "Y": x}, ["Out"])
    with pytest.raises(InvalidArgument, match="float32 but Y is int64"):
        run_op("elementwise_add", {"X": x, "Y": np.ones((3,), np.int64)}, ["Out"])


def _infer(op_type, x_info, y_info, attrs):
    desc = make_op_desc(op_type, {"X": ["x"], "Y": ["y"]}, {"Out": ["out"]}, attrs)
    return _core.op_registry.infer_shape(desc.SerializeToString(), {"x": x_info, "y": y_info})


def test_infer_shape_keeps_batch_dim_and_lod_level():
    result = _infer("elementwise_add", ([-1, 4], 0, 1, 0), ([4], 0, 0, 0), {"axis": 1})
    assert result["out"] == ([-1, 4], 0, 1, 0)
    result = _infer("elementwise_div", ([-1, 3, 4], 1, 0, 0), ([-1, 3, 4], 1, 0, 0), {})
    assert result["out"] == ([-1, 3, 4], 1, 0, 0)


def test_infer_shape_rejects_mismatch_with_both_shapes():
    with pytest.raises(InvalidArgument, match=r"elementwise_sub.*\[5\].*\[-1, 4\]"):
        _infer("elementwise_sub", ([-1, 4], 0, 0, 0), ([5], 0, 0, 0), {"axis": -1})
