"""accuracy and auc against NumPy: top-k accuracy, AUC against the exact rank statistic, streaming
and sliding-window AUC, in-place stat updates in a program, and bad inputs named in errors."""

import numpy as np
import pytest

from fleet import _core
from fleet.errors import InvalidArgument
from fleet.proto import framework_pb2 as pb
from fleet.testing.op_test import make_op_desc, run_op

RNG = np.random.default_rng(21)


# ---- accuracy ------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 2, 3])
def test_accuracy_top_k_matches_numpy(k):
    n, c = 64, 6
    p = RNG.random((n, c)).astype(np.float32)
    label = RNG.integers(0, c, size=(n, 1)).astype(np.int64)
    out = run_op("accuracy", {"Out": p, "Label": label}, ["Accuracy", "Correct", "Total"], {"k": k})
    top = np.argsort(-p.astype(np.float64), axis=1)[:, :k]
    correct = int((top == label).any(axis=1).sum())
    assert int(out["Correct"][0]) == correct
    assert int(out["Total"][0]) == n
    np.testing.assert_allclose(out["Accuracy"], [correct / n], rtol=1e-6)


def test_accuracy_with_paddle_topk_indices():
    indices = np.array([[2, 0], [1, 3], [0, 1]], dtype=np.int64)
    values = np.ones((3, 2), dtype=np.float32)
    label = np.array([[0], [2], [1]], dtype=np.int64)
    out = run_op(
        "accuracy",
        {"Out": values, "Indices": indices, "Label": label},
        ["Accuracy", "Correct", "Total"],
    )
    assert int(out["Correct"][0]) == 2
    np.testing.assert_allclose(out["Accuracy"], [2 / 3], rtol=1e-6)


def test_accuracy_names_bad_label():
    with pytest.raises(InvalidArgument, match="label value 5 at row 1 is outside \\[0, 4\\)"):
        run_op(
            "accuracy",
            {"Out": np.ones((2, 4), np.float32), "Label": np.array([[0], [5]])},
            ["Accuracy"],
        )


# ---- auc -----------------------------------------------------------------------------------


def _exact_auc(pred: np.ndarray, label: np.ndarray) -> float:
    """Mann-Whitney statistic: the probability that a positive outranks a negative."""
    ranks = np.empty(len(pred))
    ranks[np.argsort(pred, kind="mergesort")] = np.arange(1, len(pred) + 1)
    pos = label == 1
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return (ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def _batch(n: int) -> tuple[np.ndarray, np.ndarray]:
    label = RNG.integers(0, 2, size=n).astype(np.int64)
    score = 1 / (1 + np.exp(-(RNG.standard_normal(n) + 1.2 * label)))
    predict = np.stack([1 - score, score], axis=1).astype(np.float32)
    return predict, label[:, None]


def _auc(predict, label, stat_pos, stat_neg, **attrs) -> dict:
    return run_op(
        "auc",
        {"Predict": predict, "Label": label, "StatPos": stat_pos, "StatNeg": stat_neg},
        ["AUC", "StatPosOut", "StatNegOut"],
        attrs,
    )


def _zeros(size: int) -> np.ndarray:
    return np.zeros(size, dtype=np.int64)


@pytest.mark.parametrize("n,thresholds", [(3000, 4095), (500, 200)])
def test_auc_close_to_exact_rank_auc(n, thresholds):
    predict, label = _batch(n)
    out = _auc(
        predict, label, _zeros(thresholds + 1), _zeros(thresholds + 1), num_thresholds=thresholds
    )
    exact = _exact_auc(predict[:, 1].astype(np.float64), label[:, 0])
    # Pairs sharing a bin count one half; fewer than 1/thresholds of the pairs can share one.
    assert abs(float(out["AUC"][0]) - exact) < 2.0 / thresholds + 1e-6
    bins = (predict[:, 1] * np.float32(thresholds)).astype(np.int64)
    np.testing.assert_array_equal(
        out["StatPosOut"], np.bincount(bins[label[:, 0] == 1], minlength=thresholds + 1)
    )
    np.testing.assert_array_equal(
        out["StatNegOut"], np.bincount(bins[label[:, 0] == 0], minlength=thresholds + 1)
    )


def test_auc_accepts_one_column_predict():
    predict, label = _batch(200)
    two = _auc(predict, label, _zeros(101), _zeros(101), num_thresholds=100)
    one = _auc(predict[:, 1:], label, _zeros(101), _zeros(101), num_thresholds=100)
    np.testing.assert_array_equal(two["AUC"], one["AUC"])


def test_streaming_auc_over_two_calls_equals_auc_of_the_union():
    (p1, l1), (p2, l2) = _batch(400), _batch(700)
    first = _auc(p1, l1, _zeros(4096), _zeros(4096))
    second = _auc(p2, l2, first["StatPosOut"], first["StatNegOut"])
    union = _auc(np.concatenate([p1, p2]), np.concatenate([l1, l2]), _zeros(4096), _zeros(4096))
    np.testing.assert_array_equal(second["StatPosOut"], union["StatPosOut"])
    np.testing.assert_array_equal(second["AUC"], union["AUC"])
    assert second["AUC"][0] != first["AUC"][0]


class _AucProgram:
    """One auc op in a program whose StatPosOut / StatNegOut are the same variables as StatPos /
    StatNeg, as the auc layer builds it; run() feeds one batch."""

    def __init__(self, size: int) -> None:
        self.scope = _core.Scope()
        self.scope.var("pos").get_tensor().set(_zeros(size))
        self.scope.var("neg").get_tensor().set(_zeros(size))
        op = make_op_desc(
            "auc",
            {"Predict": ["p"], "Label": ["l"], "StatPos": ["pos"], "StatNeg": ["neg"]},
            {"AUC": ["auc"], "StatPosOut": ["pos"], "StatNegOut": ["neg"]},
            {"num_thresholds": size - 1},
        )
        program = pb.ProgramDesc()
        program.blocks.add(idx=0, parent_idx=-1).ops.extend([op])
        self.executor = _core.Executor()
        self.prepared = self.executor.prepare(program.SerializeToString(), 0)

    def run(self, predict: np.ndarray, label: np.ndarray) -> None:
        self.scope.var("p").get_tensor().set(predict)
        self.scope.var("l").get_tensor().set(label)
        self.executor.run(self.prepared, self.scope, [])

    def value(self, name: str) -> np.ndarray:
        return self.scope.find_var(name).get_tensor().numpy()


def test_auc_updates_stats_in_place_across_runs():
    size = 1024
    program = _AucProgram(size)
    batches = [_batch(300) for _ in range(3)]
    for predict, label in batches:
        program.run(predict, label)
    predict = np.concatenate([b[0] for b in batches])
    label = np.concatenate([b[1] for b in batches])
    union = _auc(predict, label, _zeros(size), _zeros(size), num_thresholds=size - 1)
    np.testing.assert_array_equal(program.value("pos"), union["StatPosOut"])
    np.testing.assert_array_equal(program.value("neg"), union["StatNegOut"])
    np.testing.assert_array_equal(program.value("auc"), union["AUC"])


def test_sliding_auc_covers_the_last_batches():
    steps, thresholds = 2, 255
    buckets = thresholds + 1
    pos, neg = _zeros((steps + 1) * buckets), _zeros((steps + 1) * buckets)
    batches = [_batch(300) for _ in range(4)]
    for predict, label in batches:
        out = _auc(predict, label, pos, neg, num_thresholds=thresholds, slide_steps=steps)
        pos, neg = out["StatPosOut"], out["StatNegOut"]
    last = batches[-steps:]
    window = _auc(
        np.concatenate([b[0] for b in last]),
        np.concatenate([b[1] for b in last]),
        _zeros(buckets),
        _zeros(buckets),
        num_thresholds=thresholds,
    )
    np.testing.assert_array_equal(out["AUC"], window["AUC"])
    np.testing.assert_array_equal(pos[steps * buckets :], window["StatPosOut"])


def test_auc_names_bad_inputs_and_leaves_stats_untouched():
    program = _AucProgram(11)
    program.run(*_batch(20))
    before = program.value("pos").copy(), program.value("neg").copy()
    predict, label = _batch(5)
    label[3] = 2
    with pytest.raises(InvalidArgument, match="label value 2 at row 3 is not 0 or 1"):
        program.run(predict, label)
    predict, label = _batch(5)
    predict[1, 1] = 1.5
    with pytest.raises(InvalidArgument, match="predicted probability 1.5 at row 1"):
        program.run(predict, label)
    np.testing.assert_array_equal(program.value("pos"), before[0])
    np.testing.assert_array_equal(program.value("neg"), before[1])
    with pytest.raises(InvalidArgument, match="must be int64 with 11 elements"):
        _auc(*_batch(5), _zeros(12), _zeros(12), num_thresholds=10)
