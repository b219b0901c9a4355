"""one_hot, top_k, clip and norm (l2_normalize) against NumPy, their gradients by finite
differences, and their errors."""

import numpy as np
import pytest

from fleet.errors import InvalidArgument
from fleet.testing.op_test import check_grad, run_op

RNG = np.random.default_rng(29)


def _rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def test_one_hot_matches_numpy():
    ids = np.array([[0], [3], [1], [3]], dtype=np.int64)
    out = run_op("one_hot", {"X": ids}, ["Out"], {"depth": 4})["Out"]
    np.testing.assert_array_equal(out, np.eye(4, dtype=np.float32)[ids[:, 0]])


def test_one_hot_out_of_range_is_an_error_or_a_zero_row():
    ids = np.array([[1], [5]], dtype=np.int64)
    with pytest.raises(InvalidArgument, match=r"id 5 \(element 1 of X\) is outside \[0, depth=4\)"):
        run_op("one_hot", {"X": ids}, ["Out"], {"depth": 4})
    out = run_op("one_hot", {"X": ids}, ["Out"], {"depth": 4, "allow_out_of_range": True})["Out"]
    np.testing.assert_array_equal(out, [[0, 1, 0, 0], [0, 0, 0, 0]])


def test_top_k_matches_numpy_and_routes_the_gradient():
    x = _rand(3, 6)
    outs = run_op("top_k", {"X": x}, ["Out", "Indices"], {"k": 2})
    order = np.argsort(-x, axis=1, kind="stable")[:, :2]
    np.testing.assert_array_equal(outs["Indices"], order)
    np.testing.assert_array_equal(outs["Out"], np.take_along_axis(x, order, axis=1))
    check_grad("top_k", {"X": x}, wrt=["X"], attrs={"k": 2}, aux_slots=["Indices"])


def test_top_k_larger_than_the_row_is_an_error():
    with pytest.raises(InvalidArgument, match="k=7"):
        run_op("top_k", {"X": _rand(2, 6)}, ["Out", "Indices"], {"k": 7})


def test_clip_matches_numpy_and_its_gradient_stops_at_the_bounds():
    # Values kept away from the bounds, where the derivative jumps.
    x = np.array([[-2.0, -0.3, 0.1], [0.4, 1.7, -0.9]], dtype=np.float32)
    out = run_op("clip", {"X": x}, ["Out"], {"min": -0.5, "max": 0.5})["Out"]
    np.testing.assert_array_equal(out, np.clip(x, -0.5, 0.5))
    check_grad("clip", {"X": x}, wrt=["X"], attrs={"min": -0.5, "max": 0.5})
    with pytest.raises(InvalidArgument, match="must not exceed max"):
        run_op("clip", {"X": x}, ["Out"], {"min": 1.0, "max": 0.0})


@pytest.mark.parametrize("shape,axis", [((3, 4), 1), ((3, 4), 0), ((2, 3, 4), 1), ((2, 3), -1)])
def test_norm_matches_numpy(shape, axis):
    x = _rand(*shape)
    outs = run_op("norm", {"X": x}, ["Out", "Norm"], {"axis": axis, "epsilon": 1e-10})
    norm = np.sqrt(np.sum(x.astype(np.float64) ** 2, axis=axis, keepdims=True) + 1e-10)
    np.testing.assert_allclose(outs["Norm"], norm, rtol=1e-6)
    np.testing.assert_allclose(outs["Out"], x / norm, rtol=1e-5, atol=1e-7)
    attrs = {"axis": axis, "epsilon": 1e-10}
    check_grad("norm", {"X": x}, wrt=["X"], attrs=attrs, aux_slots=["Norm"])
