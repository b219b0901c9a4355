"""concat, split, reshape, cast and fill_zeros_like against NumPy, their gradients, lod,
compile-time shapes and errors."""

import numpy as np
import pytest

from fleet import _core
from fleet.errors import InvalidArgument
from fleet.proto import framework_pb2 as pb
from fleet.testing.op_test import Seq, check_grad, make_op_desc, run_op

RNG = np.random.default_rng(17)
FLOAT32, FLOAT64, INT32, INT64, BOOL = 0, 1, 2, 3, 4
NUMPY = {FLOAT32: np.float32, FLOAT64: np.float64, INT32: np.int32, INT64: np.int64, BOOL: np.bool_}


def _rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _infer(op_type, inputs, outputs, attrs):
    names = {slot: [f"{slot}_{i}" for i in range(len(v))] for slot, v in inputs.items()}
    infos = {n: info for slot, v in inputs.items() for n, info in zip(names[slot], v)}
    out_names = {slot: [f"out_{slot}_{i}" for i in range(n)] for slot, n in outputs.items()}
    desc = make_op_desc(op_type, names, out_names, attrs)
    result = _core.op_registry.infer_shape(desc.SerializeToString(), infos)
    return {slot: [result[n] for n in ns] for slot, ns in out_names.items()}


def _run_program(ops, values):
    """Runs the OpDescs on a scope holding `values` (name -> ndarray); returns the scope."""
    scope = _core.Scope()
    for name, value in values.items():
        scope.var(name).get_tensor().set(value)
    program = pb.ProgramDesc()
    program.blocks.add(idx=0, parent_idx=-1).ops.extend(ops)
    executor = _core.Executor(seed=1)
    executor.run(executor.prepare(program.SerializeToString(), 0), scope, [])
    return scope


# ---- concat -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shapes,axis",
    [
        ([(2, 3), (4, 3)], 0),
        ([(2, 3), (2, 1), (2, 4)], 1),
        ([(2, 3, 4), (2, 3, 2)], -1),
        ([(2, 1, 4), (2, 3, 4)], 1),
        ([(3, 2)], 0),
    ],
)
def test_concat_matches_numpy(shapes, axis):
    xs = [_rand(*s) for s in shapes]
    out = run_op("concat", {"X": xs}, ["Out"], {"axis": axis})["Out"]
    np.testing.assert_array_equal(out, np.concatenate(xs, axis=axis))
    infos = [(list(s), FLOAT32, 0, 0) for s in shapes]
    assert (
        tuple(_infer("concat", {"X": infos}, {"Out": 1}, {"axis": axis})["Out"][0][0]) == out.shape
    )


def test_concat_int64_and_batch_dim():
    xs = [RNG.integers(0, 100, (3, k)).astype(np.int64) for k in (1, 2)]
    np.testing.assert_array_equal(
        run_op("concat", {"X": xs}, ["Out"], {"axis": 1})["Out"], np.concatenate(xs, axis=1)
    )
    out = _infer(
        "concat",
        {"X": [([-1, 2], FLOAT32, 1, 0), ([-1, 5], FLOAT32, 1, 0)]},
        {"Out": 1},
        {"axis": 1},
    )["Out"][0]
    assert out == ([-1, 7], FLOAT32, 1, 0)


def test_concat_axis0_concatenates_lod():
    a = Seq(_rand(3, 2), [[0, 1, 3]])
    b = Seq(_rand(4, 2), [[0, 4]])
    out = run_op("concat", {"X": [a, b]}, ["Out"], {"axis": 0}, raw=True)["Out"]
    assert out.lod() == [[0, 1, 3, 7]]
    two_level = run_op(
        "concat",
        {"X": [Seq(_rand(3, 1), [[0, 2], [0, 1, 3]]), Seq(_rand(2, 1), [[0, 1], [0, 2]])]},
        ["Out"],
        {"axis": 0},
        raw=True,
    )["Out"]
    assert two_level.lod() == [[0, 2, 3], [0, 1, 3, 5]]


def test_concat_gradient():
    check_grad("concat", {"X": [_rand(2, 3), _rand(2, 2)]}, wrt=["X"], attrs={"axis": 1})
    check_grad("concat", {"X": [_rand(1, 3), _rand(2, 3), _rand(1, 3)]}, wrt=["X"])


def test_concat_gradient_when_autodiff_keeps_only_some():
    """Autodiff drops the gradients nobody needs from X@GRAD: the rest must still land right."""
    a, b, c = _rand(2, 1), _rand(2, 2), _rand(2, 3)
    fwd = make_op_desc("concat", {"X": ["a", "b", "c"]}, {"Out": ["out"]}, {"axis": 1})
    (grad,) = [
        pb.OpDesc.FromString(d) for d in _core.op_registry.make_grad_ops(fwd.SerializeToString())
    ]
    for slot in grad.outputs:
        kept = [n for n in slot.arguments if n != "b@GRAD"]
        del slot.arguments[:]
        slot.arguments.extend(kept)
    dout = _rand(2, 6)
    scope = _run_program([fwd, grad], {"a": a, "b": b, "c": c, "out@GRAD": dout})
    np.testing.assert_array_equal(scope.find_var("a@GRAD").get_tensor().numpy(), dout[:, :1])
    np.testing.assert_array_equal(scope.find_var("c@GRAD").get_tensor().numpy(), dout[:, 3:])
    assert scope.find_var("b@GRAD") is None


def test_concat_mismatch():
    with pytest.raises(InvalidArgument, match=r"concat.*\[3, 2\].*\[2, 2\]"):
        run_op("concat", {"X": [_rand(2, 2), _rand(3, 2)]}, ["Out"], {"axis": 1})
    with pytest.raises(InvalidArgument, match="axis=2"):
        run_op("concat", {"X": [_rand(2, 2)]}, ["Out"], {"axis": 2})


# ---- split ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape,attrs,sections",
    [
        ((6, 2), {"num": 3, "axis": 0}, [2, 2, 2]),
        ((2, 6), {"num": 2, "axis": 1}, [3, 3]),
        ((2, 7, 3), {"sections": [2, -1, 1], "axis": 1}, [2, 4, 1]),
        ((2, 3, 5), {"sections": [1, 4], "axis": -1}, [1, 4]),
    ],
)
def test_split_matches_numpy(shape, attrs, sections):
    x = _rand(*shape)
    outs = run_op("split", {"X": x}, {"Out": len(sections)}, attrs)["Out"]
    expected = np.split(x, np.cumsum(sections)[:-1], axis=attrs["axis"])
    for got, want in zip(outs, expected):
        np.testing.assert_array_equal(got, want)
    infos = _infer("split", {"X": [(list(shape), FLOAT32, 0, 0)]}, {"Out": len(sections)}, attrs)
    assert [tuple(i[0]) for i in infos["Out"]] == [e.shape for e in expected]


def test_split_infer_shape_batch_dim_and_lod():
    infos = _infer("split", {"X": [([-1, 6], FLOAT32, 1, 0)]}, {"Out": 2}, {"num": 2, "axis": 1})
    assert infos["Out"] == [([-1, 3], FLOAT32, 1, 0)] * 2
    infos = _infer(
        "split", {"X": [([-1, 6], FLOAT32, 1, 0)]}, {"Out": 2}, {"sections": [1, -1], "axis": 0}
    )
    assert infos["Out"] == [([1, 6], FLOAT32, 0, 0), ([-1, 6], FLOAT32, 0, 0)]


def test_split_gradient():
    # The harness checks one output per slot; split into one piece exercises the gradient path.
    check_grad("split", {"X": _rand(2, 3)}, wrt=["X"], attrs={"num": 1, "axis": 1})


def test_split_gradient_is_concat_of_output_gradients():
    x = _rand(2, 5)
    fwd = make_op_desc("split", {"X": ["x"]}, {"Out": ["p", "q"]}, {"sections": [2, 3], "axis": 1})
    grads = [
        pb.OpDesc.FromString(d) for d in _core.op_registry.make_grad_ops(fwd.SerializeToString())
    ]
    dp, dq = _rand(2, 2), _rand(2, 3)
    scope = _run_program([fwd] + grads, {"x": x, "p@GRAD": dp, "q@GRAD": dq})
    np.testing.assert_array_equal(
        scope.find_var("x@GRAD").get_tensor().numpy(), np.concatenate([dp, dq], axis=1)
    )


def test_split_bad_attributes():
    with pytest.raises(InvalidArgument, match="num=4"):
        run_op("split", {"X": _rand(2, 6)}, {"Out": 4}, {"num": 4, "axis": 1})
    with pytest.raises(InvalidArgument, match=r"sections \[2, 2\] do not add up.*5"):
        run_op("split", {"X": _rand(2, 5)}, {"Out": 2}, {"sections": [2, 2], "axis": 1})


# ---- reshape ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape,target,expected",
    [
        ((2, 3, 4), [0, -1], (2, 12)),
        ((2, 3, 4), [-1, 4], (6, 4)),
        ((2, 3, 4), [4, 0, -1], (4, 3, 2)),
        ((6,), [2, 3], (2, 3)),
        ((2, 3, 4), [0, 0, 2, 2], (2, 3, 2, 2)),
    ],
)
def test_reshape_matches_numpy(shape, target, expected):
    x = _rand(*shape)
    out = run_op("reshape", {"X": x}, ["Out"], {"shape": target})["Out"]
    np.testing.assert_array_equal(out, x.reshape(expected))


def test_reshape_infer_shape_keeps_batch_dim():
    def infer(shape, target):
        return _infer("reshape", {"X": [(shape, FLOAT32, 1, 0)]}, {"Out": 1}, {"shape": target})[
            "Out"
        ][0]

    assert infer([-1, 2, 4], [0, -1]) == ([-1, 8], FLOAT32, 1, 0)
    assert infer([-1, 2, 4], [-1, 8]) == ([-1, 8], FLOAT32, 1, 0)
    assert infer([-1, 2, 4], [0, 2, 2, 2]) == ([-1, 2, 2, 2], FLOAT32, 1, 0)
    assert infer([3, 2, 4], [4, -1]) == ([4, 6], FLOAT32, 0, 0)


def test_reshape_lod_follows_first_dimension():
    x = Seq(_rand(4, 6), [[0, 1, 4]])
    kept = run_op("reshape", {"X": x}, ["Out"], {"shape": [0, 2, 3]}, raw=True)["Out"]
    assert kept.lod() == [[0, 1, 4]]
    dropped = run_op("reshape", {"X": x}, ["Out"], {"shape": [-1]}, raw=True)["Out"]
    assert dropped.lod() == []


def test_reshape_gradient():
    check_grad("reshape", {"X": _rand(2, 3, 2)}, wrt=["X"], attrs={"shape": [0, -1]})
    check_grad("reshape", {"X": _rand(2, 6)}, wrt=["X"], attrs={"shape": [3, 2, 2]})


def test_reshape_bad_shapes():
    with pytest.raises(InvalidArgument, match=r"reshape.*\[5, -1\].*\[2, 3\]"):
        run_op("reshape", {"X": _rand(2, 3)}, ["Out"], {"shape": [5, -1]})
    with pytest.raises(InvalidArgument, match="one -1"):
        run_op("reshape", {"X": _rand(2, 3)}, ["Out"], {"shape": [-1, -1]})
    with pytest.raises(InvalidArgument, match=r"\[4, 2\] holds 8.*holds 6"):
        run_op("reshape", {"X": _rand(2, 3)}, ["Out"], {"shape": [4, 2]})


# ---- cast -------------------------------------------------------------------------------------


@pytest.mark.parametrize("src", [FLOAT32, FLOAT64, INT32, INT64, BOOL])
@pytest.mark.parametrize("dst", [FLOAT32, FLOAT64, INT32, INT64, BOOL])
def test_cast_matches_numpy(src, dst):
    x = (RNG.standard_normal((3, 4)) * 5).astype(NUMPY[src])
    out = run_op("cast", {"X": x}, ["Out"], {"in_dtype": src, "out_dtype": dst})["Out"]
    assert out.dtype == NUMPY[dst]
    np.testing.assert_array_equal(out, x.astype(NUMPY[dst]))


def test_cast_gradient_and_integer_casts_have_none():
    check_grad(
        "cast", {"X": _rand(3, 2)}, wrt=["X"], attrs={"in_dtype": FLOAT32, "out_dtype": FLOAT64}
    )
    fwd = make_op_desc(
        "cast", {"X": ["x"]}, {"Out": ["y"]}, {"in_dtype": INT64, "out_dtype": FLOAT32}
    )
    assert _core.op_registry.make_grad_ops(fwd.SerializeToString()) == []


def test_cast_infer_shape_and_unknown_dtype():
    out = _infer(
        "cast",
        {"X": [([-1, 3], INT64, 1, 0)]},
        {"Out": 1},
        {"in_dtype": INT64, "out_dtype": FLOAT32},
    )["Out"][0]
    assert out == ([-1, 3], FLOAT32, 1, 0)
    with pytest.raises(InvalidArgument, match="out_dtype.*unknown dtype number 9"):
        run_op("cast", {"X": _rand(2)}, ["Out"], {"in_dtype": FLOAT32, "out_dtype": 9})
    with pytest.raises(InvalidArgument, match="in_dtype.*unknown dtype number 7"):
        _infer(
            "cast", {"X": [([2], FLOAT32, 0, 0)]}, {"Out": 1}, {"in_dtype": 7, "out_dtype": FLOAT32}
        )


# ---- fill_zeros_like --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.float64])
def test_fill_zeros_like(dtype):
    x = (RNG.standard_normal((3, 2)) * 10).astype(dtype)
    out = run_op("fill_zeros_like", {"X": x}, ["Out"])["Out"]
    assert out.dtype == dtype and out.shape == x.shape and not out.any()
    seq = run_op("fill_zeros_like", {"X": Seq(x, [[0, 3]])}, ["Out"], raw=True)["Out"]
    assert seq.lod() == [[0, 3]]
    assert not _core.op_registry.has_grad("fill_zeros_like")
