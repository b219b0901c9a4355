"""truncated_gaussian_random (moments and bounds, seeded) and fill_constant_batch_size_like
(the batch dimension taken from the input at run time)."""

import numpy as np
import pytest

from fleet import _core
from fleet.errors import InvalidArgument
from fleet.testing.op_test import make_op_desc, run_op

FLOAT32, INT64 = 0, 3


def test_truncated_gaussian_random_stays_within_two_std_and_has_the_truncated_moments():
    attrs = {"shape": [200, 100], "mean": 1.0, "std": 0.5, "seed": 7, "dtype": FLOAT32}
    out = run_op("truncated_gaussian_random", {}, ["Out"], attrs)["Out"]
    assert out.shape == (200, 100) and out.dtype == np.float32
    assert out.min() >= 1.0 - 2 * 0.5 and out.max() <= 1.0 + 2 * 0.5
    # A standard normal truncated to [-2, 2] has mean 0 and std 0.8796.
    assert abs(out.mean() - 1.0) < 0.01
    assert abs(out.std() - 0.5 * 0.8796) < 0.01
    again = run_op("truncated_gaussian_random", {}, ["Out"], attrs)["Out"]
    np.testing.assert_array_equal(out, again)


def test_fill_constant_batch_size_like_takes_the_batch_from_the_input():
    x = np.zeros((7, 3), np.float32)
    attrs = {"shape": [-1, 4], "value": 2.5, "dtype": FLOAT32}
    out = run_op("fill_constant_batch_size_like", {"Input": x}, ["Out"], attrs)["Out"]
    np.testing.assert_array_equal(out, np.full((7, 4), 2.5, np.float32))
    attrs = {"shape": [2, -1], "value": 3, "dtype": INT64, "input_dim_idx": 1, "output_dim_idx": 1}
    out = run_op("fill_constant_batch_size_like", {"Input": x}, ["Out"], attrs)["Out"]
    assert out.dtype == np.int64 and out.tolist() == [[3, 3, 3], [3, 3, 3]]
    desc = make_op_desc("fill_constant_batch_size_like", {"Input": ["x"]}, {"Out": ["o"]}, attrs)
    inferred = _core.op_registry.infer_shape(desc.SerializeToString(), {"x": ([-1, 3], 0, 0, 0)})
    assert inferred["o"][0] == [2, 3]


def test_fill_constant_batch_size_like_with_a_bad_index_names_it():
    with pytest.raises(InvalidArgument, match="input_dim_idx 2"):
        run_op(
            "fill_constant_batch_size_like",
            {"Input": np.zeros((2, 3), np.float32)},
            ["Out"],
            {"shape": [-1], "value": 0.0, "input_dim_idx": 2},
        )
