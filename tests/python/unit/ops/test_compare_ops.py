"""less_than, less_equal, greater_than, greater_equal, equal and not_equal against NumPy, with
broadcasting and integer inputs; they give bool and have no gradient."""

import numpy as np
import pytest

from fleet import _core
from fleet.errors import InvalidArgument
from fleet.testing.op_test import run_op

X = np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]], dtype=np.float32)
Y = np.array([[2.0, 2.0, 2.0], [1.0, 2.0, 3.0]], dtype=np.float32)


def _check(out, want, op_type):
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, want)
    assert not _core.op_registry.has_grad(op_type)


def test_each_comparison_matches_numpy():
    xy = {"X": X, "Y": Y}
    _check(run_op("less_than", xy, ["Out"])["Out"], X < Y, "less_than")
    _check(run_op("less_equal", xy, ["Out"])["Out"], X <= Y, "less_equal")
    _check(run_op("greater_than", xy, ["Out"])["Out"], X > Y, "greater_than")
    _check(run_op("greater_equal", xy, ["Out"])["Out"], X >= Y, "greater_equal")
    _check(run_op("equal", xy, ["Out"])["Out"], X == Y, "equal")
    _check(run_op("not_equal", xy, ["Out"])["Out"], X != Y, "not_equal")


def test_a_scalar_and_a_row_broadcast():
    two = np.array([2.0], np.float32)
    _check(run_op("less_than", {"X": X, "Y": two}, ["Out"])["Out"], X < 2.0, "less_than")
    ids = np.array([[1, 5], [7, 5]], dtype=np.int64)
    five = np.array([5], np.int64)
    _check(run_op("equal", {"X": ids, "Y": five}, ["Out"])["Out"], ids == 5, "equal")


def test_mismatched_dtypes_are_an_error():
    with pytest.raises(InvalidArgument, match="X is float32 but Y is int64"):
        run_op("less_than", {"X": X, "Y": np.array([1], np.int64)}, ["Out"])
