"""sequence_pool: every pooltype against NumPy on LoD inputs with empty sequences, MaxIndex,
lod of the output, and gradients for each pooltype."""

import numpy as np
import pytest

from fleet import _core
from fleet.errors import InvalidArgument
from fleet.testing.op_test import Seq, check_grad, make_op_desc, run_op

RNG = np.random.default_rng(3)
POOLTYPES = ["SUM", "AVERAGE", "SQRT", "MAX", "FIRST", "LAST"]


def _pool64(x: np.ndarray, offsets: list[int], pooltype: str, pad: float) -> np.ndarray:
    x = x.astype(np.float64)
    rows = []
    for begin, end in zip(offsets[:-1], offsets[1:]):
        seq = x[begin:end]
        if end == begin:
            rows.append(np.full(x.shape[1:], pad))
        elif pooltype == "SUM":
            rows.append(seq.sum(0))
        elif pooltype == "AVERAGE":
            rows.append(seq.mean(0))
        elif pooltype == "SQRT":
            rows.append(seq.sum(0) / np.sqrt(end - begin))
        elif pooltype == "MAX":
            rows.append(seq.max(0))
        elif pooltype == "FIRST":
            rows.append(seq[0])
        else:
            rows.append(seq[-1])
    return np.stack(rows)


def _random_offsets(num_seqs: int, max_len: int) -> list[int]:
    lengths = RNG.integers(0, max_len + 1, size=num_seqs)
    lengths[RNG.integers(num_seqs)] = 0  # at least one empty sequence
    lengths[RNG.integers(num_seqs)] = max(max_len, 1)  # and at least one row in all
    return [0] + np.cumsum(lengths).tolist()


@pytest.mark.parametrize("pooltype", POOLTYPES)
@pytest.mark.parametrize("tail", [(3,), (2, 2)])
def test_sequence_pool_matches_numpy(pooltype, tail):
    offsets = _random_offsets(7, 4)
    x = RNG.standard_normal((offsets[-1], *tail)).astype(np.float32)
    out = run_op(
        "sequence_pool",
        {"X": Seq(x, [offsets])},
        ["Out", "MaxIndex"],
        {"pooltype": pooltype, "pad_value": 0.5},
        raw=True,
    )
    pooled = np.asarray(out["Out"])
    assert out["Out"].lod() == []
    assert pooled.shape == (7, *tail)
    np.testing.assert_allclose(pooled, _pool64(x, offsets, pooltype, 0.5), rtol=1e-5, atol=1e-6)
    if pooltype == "MAX":
        index = np.asarray(out["MaxIndex"])
        assert index.dtype == np.int32
        for i, (begin, end) in enumerate(zip(offsets[:-1], offsets[1:])):
            if begin == end:
                assert (index[i] == -1).all()
            else:
                expected = begin + x[begin:end].argmax(0)
                np.testing.assert_array_equal(index[i], expected)


def test_sequence_pool_two_level_lod_keeps_the_outer_level():
    x = RNG.standard_normal((6, 2)).astype(np.float32)
    lod = [[0, 2, 4], [0, 1, 3, 3, 6]]
    out = run_op("sequence_pool", {"X": Seq(x, lod)}, ["Out"], {"pooltype": "SUM"}, raw=True)["Out"]
    assert out.lod() == [[0, 2, 4]]
    np.testing.assert_allclose(np.asarray(out), _pool64(x, lod[1], "SUM", 0.0), rtol=1e-6)


@pytest.mark.parametrize("pooltype", POOLTYPES)
def test_sequence_pool_gradient(pooltype):
    offsets = [0, 2, 2, 5, 6]
    # Distinct, well separated values keep MAX's choice stable under finite differences.
    x = (RNG.permutation(18).reshape(6, 3) * 0.1).astype(np.float32)
    out_slots = ["Out", "MaxIndex"] if pooltype == "MAX" else ["Out"]
    check_grad(
        "sequence_pool",
        {"X": Seq(x, [offsets])},
        wrt=["X"],
        attrs={"pooltype": pooltype, "pad_value": -1.0},
        out_slots=out_slots,
    )


def test_sequence_pool_gradient_of_empty_sequences_is_zero():
    x = RNG.standard_normal((3, 2)).astype(np.float32)
    dout = np.ones((4, 2), dtype=np.float32)
    dx = run_op(
        "sequence_pool_grad",
        {"X": Seq(x, [[0, 0, 3, 3, 3]]), "Out@GRAD": dout},
        ["X@GRAD"],
        {"pooltype": "AVERAGE"},
    )["X@GRAD"]
    np.testing.assert_allclose(dx, np.full((3, 2), 1 / 3), rtol=1e-6)


def test_sequence_pool_needs_lod():
    with pytest.raises(InvalidArgument, match="needs a lod"):
        run_op("sequence_pool", {"X": np.ones((3, 2), np.float32)}, ["Out"], {"pooltype": "SUM"})
    with pytest.raises(InvalidArgument, match="pooltype 'MEDIAN' is unknown"):
        run_op(
            "sequence_pool",
            {"X": Seq(np.ones((3, 2), np.float32), [[0, 3]])},
            ["Out"],
            {"pooltype": "MEDIAN"},
        )


def test_sequence_pool_infer_shape():
    desc = make_op_desc(
        "sequence_pool", {"X": ["x"]}, {"Out": ["o"], "MaxIndex": ["m"]}, {"pooltype": "MAX"}
    )
    out = _core.op_registry.infer_shape(desc.SerializeToString(), {"x": ([-1, 16], 0, 1, 0)})
    assert out["o"][:3] == ([-1, 16], 0, 0)
    assert out["m"][:3] == ([-1, 16], 2, 0)  # int32
