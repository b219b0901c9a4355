"""transpose, expand, slice, squeeze, unsqueeze, assign and assign_value against NumPy, their
gradients by finite differences, compile-time shapes and errors."""

import numpy as np
import pytest

from fleet import _core
from fleet.errors import InvalidArgument
from fleet.testing.op_test import Seq, check_grad, make_op_desc, run_op

RNG = np.random.default_rng(23)
FLOAT32, INT64 = 0, 3


def _rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _infer(op_type, slot, shape, attrs, dtype=FLOAT32):
    desc = make_op_desc(op_type, {slot: ["x"]}, {"Out": ["out"]}, attrs)
    return _core.op_registry.infer_shape(desc.SerializeToString(), {"x": (shape, dtype, 0, 0)})[
        "out"
    ]


@pytest.mark.parametrize("perm", [[1, 0], [0, 2, 1], [2, 0, 1]])
def test_transpose_matches_numpy(perm):
    x = _rand(*[2, 3, 4][: len(perm)])
    out = run_op("transpose", {"X": x}, ["Out"], {"axis": perm})["Out"]
    np.testing.assert_array_equal(out, np.transpose(x, perm))
    assert _infer("transpose", "X", [-1, 3, 4][: len(perm)], {"axis": perm})[0] == [
        [-1, 3, 4][p] for p in perm
    ]


def test_transpose_works_on_int64_and_its_gradient_is_the_inverse():
    ids = np.arange(6, dtype=np.int64).reshape(2, 3)
    np.testing.assert_array_equal(
        run_op("transpose", {"X": ids}, ["Out"], {"axis": [1, 0]})["Out"], ids.T
    )
    check_grad("transpose", {"X": _rand(2, 3, 4)}, wrt=["X"], attrs={"axis": [2, 0, 1]})


def test_transpose_refuses_a_non_permutation():
    with pytest.raises(InvalidArgument, match="not a permutation"):
        _infer("transpose", "X", [2, 3], {"axis": [0, 0]})


@pytest.mark.parametrize("times", [[1, 1], [2, 1], [1, 3], [2, 3]])
def test_expand_matches_numpy_tile_and_sums_its_gradient(times):
    x = _rand(2, 3)
    out = run_op("expand", {"X": x}, ["Out"], {"expand_times": times})["Out"]
    np.testing.assert_array_equal(out, np.tile(x, times))
    check_grad("expand", {"X": x}, wrt=["X"], attrs={"expand_times": times})


def test_expand_needs_one_factor_per_dimension():
    with pytest.raises(InvalidArgument, match="expand_times"):
        _infer("expand", "X", [2, 3], {"expand_times": [2]})


@pytest.mark.parametrize(
    "axes,starts,ends",
    [
        ([0], [1], [3]),
        ([1], [-2], [100]),
        ([0, 2], [0, 1], [-1, 3]),
        ([2], [3], [1]),  # empty window
    ],
)
def test_slice_matches_numpy(axes, starts, ends):
    x = _rand(4, 3, 5)
    attrs = {"axes": axes, "starts": starts, "ends": ends}
    out = run_op("slice", {"Input": x}, ["Out"], attrs)["Out"]
    index = [slice(None)] * 3
    for a, s, e in zip(axes, starts, ends):
        index[a] = slice(s, e)
    np.testing.assert_array_equal(out, x[tuple(index)])
    shape = _infer("slice", "Input", [-1, 3, 5], attrs)[0]
    assert shape[1:] == list(x[tuple(index)].shape)[1:]


def test_slice_gradient_is_zero_outside_the_window():
    attrs = {"axes": [0, 1], "starts": [1, 0], "ends": [3, 2]}
    check_grad("slice", {"Input": _rand(4, 3)}, wrt=["Input"], attrs=attrs)


def test_squeeze_and_unsqueeze_match_numpy_and_keep_the_data():
    x = _rand(3, 1, 4, 1)
    np.testing.assert_array_equal(
        run_op("squeeze", {"X": x}, ["Out"], {"axes": [1]})["Out"], x.reshape(3, 4, 1)
    )
    np.testing.assert_array_equal(
        run_op("squeeze", {"X": x}, ["Out"], {"axes": []})["Out"], x.reshape(3, 4)
    )
    y = _rand(3, 4)
    np.testing.assert_array_equal(
        run_op("unsqueeze", {"X": y}, ["Out"], {"axes": [0, 2]})["Out"], y.reshape(1, 3, 1, 4)
    )
    np.testing.assert_array_equal(
        run_op("unsqueeze", {"X": y}, ["Out"], {"axes": [-1]})["Out"], y.reshape(3, 4, 1)
    )
    assert _infer("squeeze", "X", [-1, 1, 4], {"axes": [1]})[0] == [-1, 4]
    assert _infer("unsqueeze", "X", [-1, 4], {"axes": [1]})[0] == [-1, 1, 4]


def test_squeeze_and_unsqueeze_gradients():
    check_grad("squeeze", {"X": _rand(3, 1, 2)}, wrt=["X"], attrs={"axes": [1]})
    check_grad("unsqueeze", {"X": _rand(3, 2)}, wrt=["X"], attrs={"axes": [1]})


def test_squeeze_of_a_dimension_other_than_one_names_it():
    with pytest.raises(InvalidArgument, match="size 1"):
        run_op("squeeze", {"X": _rand(3, 2)}, ["Out"], {"axes": [1]})


def test_assign_copies_values_and_lod_and_passes_the_gradient():
    x = Seq(_rand(5, 2), [[0, 2, 5]])
    out = run_op("assign", {"X": x}, ["Out"], raw=True)["Out"]
    np.testing.assert_array_equal(out.numpy(), x.values)
    assert out.lod() == [[0, 2, 5]]
    check_grad("assign", {"X": _rand(3, 2)}, wrt=["X"])


def test_assign_value_writes_floats_and_ints():
    out = run_op(
        "assign_value",
        {},
        ["Out"],
        {"shape": [2, 2], "dtype": FLOAT32, "fp32_values": [1.0, 2.0, 3.5, -1.0]},
    )["Out"]
    np.testing.assert_array_equal(out, np.array([[1, 2], [3.5, -1]], np.float32))
    ids = run_op(
        "assign_value", {}, ["Out"], {"shape": [3], "dtype": INT64, "int64_values": [7, 2**40, -3]}
    )["Out"]
    assert ids.dtype == np.int64 and ids.tolist() == [7, 2**40, -3]
    with pytest.raises(InvalidArgument, match="needs 4 values, got 3"):
        run_op(
            "assign_value",
            {},
            ["Out"],
            {"shape": [2, 2], "dtype": FLOAT32, "fp32_values": [1.0, 2.0, 3.0]},
        )
