"""fill_constant, uniform_random and gaussian_random: shapes, dtypes, values, value ranges and
statistics, determinism under a fixed seed, and attribute errors."""

import numpy as np
import pytest

from fleet import _core
from fleet.errors import InvalidArgument
from fleet.proto import framework_pb2 as pb
from fleet.testing.op_test import make_op_desc, run_op

FLOAT32, FLOAT64, INT32, INT64, BOOL = 0, 1, 2, 3, 4
NUMPY = {FLOAT32: np.float32, FLOAT64: np.float64, INT32: np.int32, INT64: np.int64, BOOL: np.bool_}


def _infer(op_type, attrs):
    desc = make_op_desc(op_type, {}, {"Out": ["out"]}, attrs)
    return _core.op_registry.infer_shape(desc.SerializeToString(), {})["out"]


# ---- fill_constant ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [FLOAT32, FLOAT64, INT32, INT64, BOOL])
@pytest.mark.parametrize("shape", [[1], [3, 4], [2, 1, 5]])
def test_fill_constant(dtype, shape):
    out = run_op("fill_constant", {}, ["Out"], {"shape": shape, "dtype": dtype, "value": 3.0})[
        "Out"
    ]
    assert out.dtype == NUMPY[dtype] and list(out.shape) == shape
    np.testing.assert_array_equal(out, np.full(shape, 3.0).astype(NUMPY[dtype]))
    assert _infer("fill_constant", {"shape": shape, "dtype": dtype, "value": 3.0}) == (
        shape,
        dtype,
        0,
        0,
    )


def test_fill_constant_values():
    negative = run_op(
        "fill_constant", {}, ["Out"], {"shape": [2], "dtype": FLOAT32, "value": -0.25}
    )["Out"]
    np.testing.assert_array_equal(negative, [-0.25, -0.25])
    big = 2**53 + 1  # not representable in a float attribute: str_value carries it
    out = run_op(
        "fill_constant",
        {},
        ["Out"],
        {"shape": [2], "dtype": INT64, "value": float(big), "str_value": str(big)},
    )
    np.testing.assert_array_equal(out["Out"], [big, big])
    zero = run_op("fill_constant", {}, ["Out"], {"shape": [0, 3], "dtype": FLOAT32})["Out"]
    assert zero.shape == (0, 3)


def test_fill_constant_errors():
    with pytest.raises(InvalidArgument, match="dtype.*unknown dtype number 42"):
        run_op("fill_constant", {}, ["Out"], {"shape": [2], "dtype": 42, "value": 1.0})
    with pytest.raises(InvalidArgument, match=r"fill_constant.*\[-1, 2\]"):
        run_op("fill_constant", {}, ["Out"], {"shape": [-1, 2], "dtype": FLOAT32})
    with pytest.raises(InvalidArgument, match="str_value 'abc'"):
        run_op("fill_constant", {}, ["Out"], {"shape": [1], "dtype": INT64, "str_value": "abc"})


# ---- uniform_random / gaussian_random -----------------------------------------------------------


@pytest.mark.parametrize("dtype", [FLOAT32, FLOAT64])
def test_uniform_random_range_and_statistics(dtype):
    attrs = {"shape": [1000, 50], "min": -2.0, "max": 3.0, "seed": 7, "dtype": dtype}
    out = run_op("uniform_random", {}, ["Out"], attrs)["Out"]
    assert out.shape == (1000, 50) and out.dtype == NUMPY[dtype]
    assert out.min() >= -2.0 and out.max() < 3.0
    # 50k draws: mean 0.5 and variance 25/12 within a few standard errors.
    assert abs(out.mean() - 0.5) < 0.03
    assert abs(out.var() - 25 / 12) < 0.05
    counts, _ = np.histogram(out, bins=10, range=(-2, 3))
    assert counts.min() > 4500 and counts.max() < 5500
    assert _infer("uniform_random", attrs) == ([1000, 50], dtype, 0, 0)


@pytest.mark.parametrize("dtype", [FLOAT32, FLOAT64])
def test_gaussian_random_statistics(dtype):
    attrs = {"shape": [201, 99], "mean": 1.5, "std": 0.5, "seed": 3, "dtype": dtype}
    out = run_op("gaussian_random", {}, ["Out"], attrs)["Out"]
    assert out.shape == (201, 99) and out.dtype == NUMPY[dtype]
    assert abs(out.mean() - 1.5) < 0.01
    assert abs(out.std() - 0.5) < 0.01
    # Tails of a normal: about 4.55% beyond two standard deviations.
    assert 0.04 < np.mean(np.abs(out - 1.5) > 1.0) < 0.051
    assert np.all(np.isfinite(out))
    assert _infer("gaussian_random", attrs) == ([201, 99], dtype, 0, 0)


@pytest.mark.parametrize("op_type", ["uniform_random", "gaussian_random"])
def test_fixed_seed_is_deterministic(op_type):
    attrs = {"shape": [7, 5], "seed": 123, "dtype": FLOAT32}
    first = run_op(op_type, {}, ["Out"], attrs)["Out"]
    np.testing.assert_array_equal(first, run_op(op_type, {}, ["Out"], attrs)["Out"])
    other = run_op(op_type, {}, ["Out"], dict(attrs, seed=124))["Out"]
    assert not np.array_equal(first, other)


@pytest.mark.parametrize("op_type", ["uniform_random", "gaussian_random"])
def test_seed_zero_draws_from_the_run_generator(op_type):
    """Two seed-0 ops of one program differ; the same executor seed reproduces both."""

    def run(executor_seed):
        program = pb.ProgramDesc()
        block = program.blocks.add(idx=0, parent_idx=-1)
        for name in ("a", "b"):
            block.ops.append(
                make_op_desc(
                    op_type, {}, {"Out": [name]}, {"shape": [4, 3], "seed": 0, "dtype": FLOAT32}
                )
            )
        scope = _core.Scope()
        executor = _core.Executor(seed=executor_seed)
        executor.run(executor.prepare(program.SerializeToString(), 0), scope, [])
        return [scope.find_var(n).get_tensor().numpy() for n in ("a", "b")]

    a, b = run(99)
    assert not np.array_equal(a, b)
    a2, b2 = run(99)
    np.testing.assert_array_equal(a, a2)
    np.testing.assert_array_equal(b, b2)
    assert not np.array_equal(a, run(100)[0])


def test_odd_sizes_fill_every_element():
    for op_type in ("uniform_random", "gaussian_random"):
        out = run_op(
            op_type,
            {},
            ["Out"],
            {"shape": [3], "seed": 1, "min": 5.0, "max": 6.0, "mean": 5.5, "std": 0.01},
        )["Out"]
        assert np.all((out > 4.0) & (out < 7.0))


def test_random_ops_reject_integer_dtypes_and_bad_ranges():
    with pytest.raises(InvalidArgument, match="uniform_random.*int64.*float32 or float64"):
        run_op("uniform_random", {}, ["Out"], {"shape": [2], "dtype": INT64})
    with pytest.raises(InvalidArgument, match="gaussian_random.*unknown dtype number 11"):
        run_op("gaussian_random", {}, ["Out"], {"shape": [2], "dtype": 11})
    with pytest.raises(InvalidArgument, match=r"min \(2\) must not exceed max \(1\)"):
        run_op("uniform_random", {}, ["Out"], {"shape": [2], "min": 2.0, "max": 1.0})
    with pytest.raises(InvalidArgument, match="std"):
        run_op("gaussian_random", {}, ["Out"], {"shape": [2], "std": -1.0})


def test_fill_ops_have_no_gradient():
    for op_type in ("fill_constant", "uniform_random", "gaussian_random"):
        assert not _core.op_registry.has_grad(op_type)
