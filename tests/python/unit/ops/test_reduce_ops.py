"""mean, reduce_sum, reduce_mean and sum (LoDTensor, SelectedRows and mixed inputs) against
NumPy float64, their gradients, lod, compile-time shapes and errors."""

import numpy as np
import pytest

from fleet import _core
from fleet.errors import InvalidArgument
from fleet.proto import framework_pb2 as pb
from fleet.testing.op_test import Rows, Seq, check_grad, make_op_desc, run_op

RNG = np.random.default_rng(3)
LOD_TENSOR, SELECTED_ROWS = 0, 1


def _rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _infer(op_type, inputs, attrs=None):
    names = {slot: [f"{slot}_{i}" for i in range(len(v))] for slot, v in inputs.items()}
    infos = {n: info for slot, v in inputs.items() for n, info in zip(names[slot], v)}
    desc = make_op_desc(op_type, names, {"Out": ["out"]}, attrs or {})
    return _core.op_registry.infer_shape(desc.SerializeToString(), infos)["out"]


# ---- mean -------------------------------------------------------------------------------------


def test_mean_matches_numpy_and_has_shape_one():
    x = _rand(3, 4, 2)
    out = run_op("mean", {"X": x}, ["Out"])["Out"]
    assert out.shape == (1,)
    np.testing.assert_allclose(out[0], x.astype(np.float64).mean(), rtol=1e-6)
    assert _infer("mean", {"X": [([-1, 4], 0, 1, 0)]}) == ([1], 0, 0, 0)


def test_mean_gradient():
    check_grad("mean", {"X": _rand(3, 4)}, wrt=["X"])


# ---- reduce_sum / reduce_mean -----------------------------------------------------------------

REDUCE_CASES = [
    # (shape, dim, keep_dim, reduce_all)
    ((3, 4), [1], False, False),
    ((3, 4), [0], True, False),
    ((3, 4), [-1], True, False),
    ((2, 3, 4), [0, 2], False, False),
    ((2, 3, 4), [0, 2], True, False),
    ((2, 3, 4), [1, -1], False, False),
    ((2, 3, 4, 5), [1, 3], True, False),
    ((2, 3, 4), [], False, True),
    ((2, 3, 4), [0], True, True),  # reduce_all wins over dim
    ((2, 3, 4), [0, 1, 2], False, False),
]


@pytest.mark.parametrize("op_type,fn", [("reduce_sum", np.sum), ("reduce_mean", np.mean)])
@pytest.mark.parametrize("shape,dim,keep_dim,reduce_all", REDUCE_CASES)
def test_reduce_matches_numpy(op_type, fn, shape, dim, keep_dim, reduce_all):
    x = _rand(*shape)
    attrs = {"dim": dim, "keep_dim": keep_dim, "reduce_all": reduce_all}
    out = run_op(op_type, {"X": x}, ["Out"], attrs)["Out"]
    axes = None if reduce_all or not dim else tuple(dim)
    expected = np.asarray(fn(x.astype(np.float64), axis=axes, keepdims=keep_dim))
    if expected.ndim == 0:
        expected = expected.reshape(1)
    assert out.shape == expected.shape
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    assert tuple(_infer(op_type, {"X": [(list(shape), 0, 0, 0)]}, attrs)[0]) == expected.shape


def test_reduce_sum_int64():
    x = RNG.integers(-100, 100, (3, 5)).astype(np.int64)
    out = run_op("reduce_sum", {"X": x}, ["Out"], {"dim": [0]})["Out"]
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, x.sum(axis=0))


@pytest.mark.parametrize(
    "shape,dim,keep_dim", [((3, 4), [1], False), ((2, 3, 2), [0, 2], True), ((2, 3, 2), [1], False)]
)
def test_reduce_gradients(shape, dim, keep_dim):
    attrs = {"dim": dim, "keep_dim": keep_dim}
    check_grad("reduce_sum", {"X": _rand(*shape)}, wrt=["X"], attrs=attrs)
    check_grad("reduce_mean", {"X": _rand(*shape)}, wrt=["X"], attrs=attrs)
    check_grad("reduce_mean", {"X": _rand(*shape)}, wrt=["X"], attrs={"reduce_all": True})


def test_reduce_keeps_lod_only_when_rows_survive():
    x = Seq(_rand(5, 3), [[0, 2, 5]])
    kept = run_op("reduce_sum", {"X": x}, ["Out"], {"dim": [1]}, raw=True)["Out"]
    assert kept.lod() == [[0, 2, 5]]
    dropped = run_op("reduce_sum", {"X": x}, ["Out"], {"dim": [0]}, raw=True)["Out"]
    assert dropped.lod() == []
    assert _infer("reduce_sum", {"X": [([-1, 3], 0, 1, 0)]}, {"dim": [1]}) == ([-1], 0, 1, 0)
    assert _infer("reduce_mean", {"X": [([-1, 3], 0, 1, 0)]}, {"dim": [0], "keep_dim": True}) == (
        [1, 3],
        0,
        0,
        0,
    )


def test_reduce_dim_out_of_range():
    with pytest.raises(InvalidArgument, match=r"reduce_sum.*dim 2 is out of range.*\[3, 4\]"):
        run_op("reduce_sum", {"X": _rand(3, 4)}, ["Out"], {"dim": [2]})
    with pytest.raises(InvalidArgument, match=r"dim -3"):
        _infer("reduce_mean", {"X": [([-1, 4], 0, 0, 0)]}, {"dim": [-3]})


# ---- sum --------------------------------------------------------------------------------------


def test_sum_of_dense_inputs():
    xs = [_rand(3, 4) for _ in range(4)]
    out = run_op("sum", {"X": xs}, ["Out"])["Out"]
    np.testing.assert_allclose(
        out, np.sum([x.astype(np.float64) for x in xs], axis=0), rtol=1e-6, atol=1e-6
    )
    ints = [RNG.integers(0, 9, (2, 3)).astype(np.int64) for _ in range(3)]
    np.testing.assert_array_equal(run_op("sum", {"X": ints}, ["Out"])["Out"], sum(ints))


def test_sum_keeps_first_lod():
    out = run_op("sum", {"X": [Seq(_rand(3, 2), [[0, 1, 3]]), _rand(3, 2)]}, ["Out"], raw=True)[
        "Out"
    ]
    assert out.lod() == [[0, 1, 3]]


def test_sum_gradient():
    check_grad("sum", {"X": [_rand(2, 3), _rand(2, 3), _rand(2, 3)]}, wrt=["X"])


def test_sum_of_selected_rows_concatenates_rows():
    a = Rows([1, 4], _rand(2, 3), height=6)
    b = Rows([4, 0, 5], _rand(3, 3), height=6)
    out = run_op("sum", {"X": [a, b]}, ["Out"])["Out"]
    assert out.rows() == [1, 4, 4, 0, 5] and out.height() == 6
    np.testing.assert_array_equal(out.numpy_value(), np.concatenate([a.value, b.value]))
    dense = np.zeros((6, 3))
    for rows in (a, b):
        np.add.at(dense, rows.rows, rows.value.astype(np.float64))
    np.testing.assert_allclose(out.to_dense(), dense, rtol=1e-6)


def test_sum_of_selected_rows_with_an_empty_input():
    empty = Rows([], np.zeros((0, 3), np.float32), height=5)
    a = Rows([2], _rand(1, 3), height=5)
    out = run_op("sum", {"X": [empty, a]}, ["Out"])["Out"]
    assert out.rows() == [2]
    np.testing.assert_array_equal(out.numpy_value(), a.value)


def test_sum_of_mixed_inputs_is_dense():
    dense = _rand(5, 2)
    a = Rows([0, 3, 3], _rand(3, 2), height=5)
    b = Rows([4], _rand(1, 2), height=5)
    out = run_op("sum", {"X": [a, dense, b]}, ["Out"])["Out"]
    expected = dense.astype(np.float64)
    for rows in (a, b):
        np.add.at(expected, rows.rows, rows.value.astype(np.float64))
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)


def test_sum_errors_name_the_inputs():
    with pytest.raises(InvalidArgument, match=r"\[2, 3\].*\[3, 2\]"):
        run_op("sum", {"X": [_rand(3, 2), _rand(2, 3)]}, ["Out"])
    with pytest.raises(InvalidArgument, match="X_1.*height 4.*height 5"):
        run_op("sum", {"X": [Rows([0], _rand(1, 2), 5), Rows([0], _rand(1, 2), 4)]}, ["Out"])
    with pytest.raises(InvalidArgument, match="X_1.*row 7 outside height 5"):
        run_op("sum", {"X": [_rand(5, 2), Rows([7], _rand(1, 2), 5)]}, ["Out"])


def test_sum_infer_shape_by_kind():
    rows = ([10, 4], 0, 0, SELECTED_ROWS)
    assert _infer("sum", {"X": [rows, rows]})[3] == SELECTED_ROWS
    mixed = _infer("sum", {"X": [rows, ([10, 4], 0, 0, LOD_TENSOR)]})
    assert mixed == ([10, 4], 0, 0, LOD_TENSOR)
    assert _infer("sum", {"X": [([-1, 4], 0, 1, 0), ([-1, 4], 0, 1, 0)]}) == ([-1, 4], 0, 1, 0)
    with pytest.raises(InvalidArgument, match=r"sum.*\[-1, 5\].*\[-1, 4\]"):
        _infer("sum", {"X": [([-1, 4], 0, 0, 0), ([-1, 5], 0, 0, 0)]})


def test_sum_in_place_output():
    """sum(X=[a, b], Out=a), as gradient accumulation may write it."""
    a, b = _rand(3, 2), _rand(3, 2)
    scope = _core.Scope()
    scope.var("a").get_tensor().set(a)
    scope.var("b").get_tensor().set(b)
    program = pb.ProgramDesc()
    block = program.blocks.add(idx=0, parent_idx=-1)
    block.ops.append(make_op_desc("sum", {"X": ["a", "b"]}, {"Out": ["a"]}, {}))
    executor = _core.Executor(seed=1)
    executor.run(executor.prepare(program.SerializeToString(), 0), scope, [])
    np.testing.assert_allclose(scope.find_var("a").get_tensor().numpy(), a + b, rtol=1e-6)
