"""lookup_table: rows gathered for ids, padding rows, lod kept, dense and sparse gradients, and
out-of-range ids named in the error."""

import numpy as np
import pytest

from fleet import _core
from fleet.errors import InvalidArgument
from fleet.testing.op_test import Seq, check_grad, make_op_desc, run_op

RNG = np.random.default_rng(5)


def _table(vocab: int, dim: int) -> np.ndarray:
    return RNG.standard_normal((vocab, dim)).astype(np.float32)


def _reference(w: np.ndarray, ids: np.ndarray, padding_idx: int = -1) -> np.ndarray:
    flat = ids.reshape(-1)
    out = w.astype(np.float64)[np.clip(flat, 0, None)]
    out[flat == padding_idx] = 0
    return out


@pytest.mark.parametrize("vocab,dim,n", [(1, 1, 1), (10, 4, 17), (50, 8, 64)])
def test_lookup_matches_numpy(vocab, dim, n):
    w = _table(vocab, dim)
    ids = RNG.integers(0, vocab, size=(n, 1)).astype(np.int64)
    out = run_op("lookup_table", {"W": w, "Ids": ids}, ["Out"])["Out"]
    assert out.shape == (n, dim)
    np.testing.assert_array_equal(out, _reference(w, ids))


def test_lookup_padding_rows_are_zero_and_lod_is_kept():
    w = _table(8, 3)
    ids = np.array([[2], [5], [2], [0], [7], [2]], dtype=np.int64)
    lod = [[0, 3, 3, 6]]  # the middle sequence is empty
    out = run_op(
        "lookup_table", {"W": w, "Ids": Seq(ids, lod)}, ["Out"], {"padding_idx": 2}, raw=True
    )["Out"]
    assert out.lod() == lod
    np.testing.assert_array_equal(np.asarray(out), _reference(w, ids, padding_idx=2))
    assert not np.asarray(out)[[0, 2, 5]].any()


def test_lookup_id_shapes():
    w = _table(6, 2)
    flat = np.array([1, 4, 0], dtype=np.int64)
    assert run_op("lookup_table", {"W": w, "Ids": flat}, ["Out"])["Out"].shape == (3, 2)
    nested = RNG.integers(0, 6, size=(2, 5, 1)).astype(np.int64)
    out = run_op("lookup_table", {"W": w, "Ids": nested}, ["Out"], {"is_distributed": True})["Out"]
    assert out.shape == (2, 5, 2)
    np.testing.assert_array_equal(out.reshape(10, 2), _reference(w, nested))


@pytest.mark.parametrize("bad,position", [(6, 3), (-2, 0)])
def test_lookup_names_out_of_range_id(bad, position):
    ids = np.array([[1], [2], [3], [4]], dtype=np.int64)
    ids[position] = bad
    with pytest.raises(
        InvalidArgument, match=f"id {bad} at position {position} of Ids 'Ids_0'.*0 <= id < 6"
    ):
        run_op("lookup_table", {"W": _table(6, 2), "Ids": ids}, ["Out"])


def test_lookup_rejects_non_int64_ids():
    with pytest.raises(InvalidArgument, match="int32, expected int64"):
        run_op("lookup_table", {"W": _table(6, 2), "Ids": np.zeros((2, 1), np.int32)}, ["Out"])


@pytest.mark.parametrize("is_sparse", [False, True])
@pytest.mark.parametrize("padding_idx", [-1, 3])
def test_lookup_gradient(is_sparse, padding_idx):
    ids = np.array([[3], [1], [3], [0], [4], [1]], dtype=np.int64)  # repeats add up
    check_grad(
        "lookup_table",
        {"W": _table(6, 3), "Ids": Seq(ids, [[0, 2, 2, 6]])},
        wrt=["W"],
        attrs={"is_sparse": is_sparse, "padding_idx": padding_idx},
    )


def test_sparse_gradient_rows_skip_padding():
    w = _table(9, 2)
    ids = np.array([[4], [8], [4], [0], [8]], dtype=np.int64)
    dout = RNG.standard_normal((5, 2)).astype(np.float32)
    attrs = {"is_sparse": True, "padding_idx": 0}
    grad = run_op(
        "lookup_table_grad", {"W": w, "Ids": ids, "Out@GRAD": dout}, ["W@GRAD"], attrs, raw=True
    )["W@GRAD"]
    assert list(grad.rows()) == [4, 8, 4, 8]
    assert grad.height() == 9
    np.testing.assert_array_equal(grad.numpy_value(), dout[[0, 1, 2, 4]])
    dense = run_op(
        "lookup_table_grad",
        {"W": w, "Ids": ids, "Out@GRAD": dout},
        ["W@GRAD"],
        {"is_sparse": False, "padding_idx": 0},
    )["W@GRAD"]
    expected = np.zeros((9, 2))
    np.add.at(expected, ids[:, 0], dout)
    expected[0] = 0
    np.testing.assert_allclose(dense, expected, rtol=1e-6)


def test_infer_shape_keeps_batch_and_lod_level():
    registry = _core.op_registry
    desc = make_op_desc(
        "lookup_table", {"W": ["w"], "Ids": ["ids"]}, {"Out": ["emb"]}, {"is_sparse": True}
    )
    out = registry.infer_shape(
        desc.SerializeToString(), {"w": ([100, 8], 0, 0, 0), "ids": ([-1, 1], 3, 1, 0)}
    )
    assert out["emb"][:3] == ([-1, 8], 0, 1)
    (grad_bytes,) = registry.make_grad_ops(desc.SerializeToString())
    from fleet.proto import framework_pb2 as pb

    grad = pb.OpDesc.FromString(grad_bytes)
    assert grad.type == "lookup_table_grad"
    infos = registry.infer_shape(
        grad_bytes,
        {"w": ([100, 8], 0, 0, 0), "ids": ([-1, 1], 3, 1, 0), "emb@GRAD": ([-1, 8], 0, 1, 0)},
    )
    assert infos["w@GRAD"] == ([100, 8], 0, 0, 1)  # kind 1: SelectedRows
