"""lookup_sparse_rows: raw int64 ids (negative, beyond 2^32) looked up in a sorted key column,
unseen ids and padding ids read as zeros, several Ids/Out pairs on one table, lod kept, and a
W that does not match Keys refused."""

import numpy as np
import pytest

from fleet.errors import InvalidArgument
from fleet.testing.op_test import Seq, run_op

RNG = np.random.default_rng(11)


def _reference(keys: np.ndarray, w: np.ndarray, ids: np.ndarray, padding_idx: int = -1):
    rows = {int(k): w[i] for i, k in enumerate(keys)}
    zero = np.zeros(w.shape[1], np.float32)
    return np.stack(
        [zero if int(i) == padding_idx else rows.get(int(i), zero) for i in ids.reshape(-1)]
    )


def test_rows_of_raw_ids_and_zeros_for_unseen_ones():
    keys = np.array([-(2**40), -17, 3, 2**33 + 5, 2**62], dtype=np.int64)
    w = RNG.standard_normal((keys.size, 4)).astype(np.float32)
    ids = np.array([[3], [2**62], [-17], [4], [-(2**40)], [3], [2**33 + 5]], dtype=np.int64)
    out = run_op("lookup_sparse_rows", {"Ids": ids, "Keys": keys, "W": w}, ["Out"])["Out"]
    assert out.shape == (7, 4)
    np.testing.assert_array_equal(out, _reference(keys, w, ids))
    assert not out[3].any()  # id 4 was never saved


def test_several_slots_padding_and_lod():
    keys = np.arange(0, 50, 5, dtype=np.int64) * 1_000_000_007
    w = RNG.standard_normal((keys.size, 3)).astype(np.float32)
    a = np.array([[keys[2]], [keys[7]], [0]], dtype=np.int64)
    b = np.array([[keys[9]], [keys[2]], [keys[1]], [13]], dtype=np.int64)
    lod = [[0, 1, 4]]
    outs = run_op(
        "lookup_sparse_rows",
        {"Ids": [a, Seq(b, lod)], "Keys": keys, "W": w},
        {"Out": 2},
        {"padding_idx": int(keys[2])},
        raw=True,
    )["Out"]
    np.testing.assert_array_equal(np.asarray(outs[0]), _reference(keys, w, a, int(keys[2])))
    np.testing.assert_array_equal(np.asarray(outs[1]), _reference(keys, w, b, int(keys[2])))
    assert outs[1].lod() == lod
    assert not np.asarray(outs[0])[0].any()


def test_w_must_have_one_row_per_key():
    keys = np.array([1, 2, 3], dtype=np.int64)
    w = np.zeros((2, 4), np.float32)
    with pytest.raises(InvalidArgument, match="one row per key"):
        run_op("lookup_sparse_rows", {"Ids": keys.reshape(-1, 1), "Keys": keys, "W": w}, ["Out"])
