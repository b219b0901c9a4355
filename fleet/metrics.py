"""Metrics over all workers of a job (Paddle's ``fleet.metrics``): each worker passes its own
statistics, every worker gets the job's value. The reductions run over the workers' Gloo group
(``fleet.util.all_reduce``), so every worker must call the same metrics in the same order.

An argument is a NumPy array (or number), a program Variable, or a variable name; the last two
are read from `scope` (the global scope by default), e.g. the AUC op's histograms::

    auc, batch_auc, [_, _, stat_pos, stat_neg] = fleet.layers.auc(prob, label)
    ... run the test set on this worker's share ...
    global_auc = fleet.metrics.auc(stat_pos, stat_neg)

Counts are reduced in float64 (int64 histograms in int64), so sums of many workers' counts stay
exact far beyond float32's 2^24.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fleet import fleet_api
from fleet.errors import InvalidArgument
from fleet.scope import global_scope


def _util(util: Any) -> Any:
    return util if util is not None else fleet_api.instance.util


def _value(x: Any, scope: Any) -> np.ndarray:
    name = x if isinstance(x, str) else getattr(x, "name", None)
    if name is None:
        return np.asarray(x)
    var = (scope if scope is not None else global_scope()).find_var(name)
    if var is None or not var.is_initialized():
        raise InvalidArgument(f"fleet.metrics: variable '{name}' has no value in the scope")
    return np.array(var.get_tensor().numpy(), copy=True)


def _reduce(x: Any, mode: str, scope: Any, util: Any) -> np.ndarray:
    array = _value(x, scope)
    if np.issubdtype(array.dtype, np.integer):
        array = array.astype(np.int64)
    else:
        array = array.astype(np.float64)
    return _util(util).all_reduce(array, mode)


def sum(input: Any, scope: Any = None, util: Any = None) -> np.ndarray:  # noqa: A001
    """Element-wise sum over the workers."""
    return _reduce(input, "sum", scope, util)


def max(input: Any, scope: Any = None, util: Any = None) -> np.ndarray:  # noqa: A001
    """Element-wise maximum over the workers."""
    return _reduce(input, "max", scope, util)


def min(input: Any, scope: Any = None, util: Any = None) -> np.ndarray:  # noqa: A001
    """Element-wise minimum over the workers."""
    return _reduce(input, "min", scope, util)


def _ratio(num: Any, den: Any, scope: Any, util: Any, what: str) -> float:
    total = _reduce(
        np.array(
            [
                np.asarray(_value(num, scope), np.float64).sum(),
                np.asarray(_value(den, scope), np.float64).sum(),
            ]
        ),
        "sum",
        None,
        util,
    )
    if total[1] == 0:
        raise InvalidArgument(f"fleet.metrics.{what}: the workers' total count is 0")
    return float(total[0] / total[1])


def mae(abserr: Any, total_ins_num: Any, scope: Any = None, util: Any = None) -> float:
    """Mean absolute error: the workers' summed absolute errors over their summed counts."""
    return _ratio(abserr, total_ins_num, scope, util, "mae")


def mse(sqrerr: Any, total_ins_num: Any, scope: Any = None, util: Any = None) -> float:
    """Mean squared error: summed squared errors over summed counts."""
    return _ratio(sqrerr, total_ins_num, scope, util, "mse")


def rmse(sqrerr: Any, total_ins_num: Any, scope: Any = None, util: Any = None) -> float:
    """Root of the mean squared error over all workers."""
    return float(np.sqrt(mse(sqrerr, total_ins_num, scope, util)))


def acc(correct: Any, total: Any, scope: Any = None, util: Any = None) -> float:
    """Accuracy: the workers' summed correct counts over their summed totals."""
    return _ratio(correct, total, scope, util, "acc")


def auc_of_histograms(stat_pos: np.ndarray, stat_neg: np.ndarray) -> float:
    """The area under the ROC curve from positive and negative counts per score bucket (bucket
    i holds scores in [i / n, (i + 1) / n)), by the trapezoid rule from the highest bucket down,
    as Paddle's auc op and fleet.metrics.auc compute it; 0.5 without both classes."""
    pos_hist = np.asarray(stat_pos, np.float64).reshape(-1)[::-1]
    neg_hist = np.asarray(stat_neg, np.float64).reshape(-1)[::-1]
    if pos_hist.shape != neg_hist.shape:
        raise InvalidArgument(
            f"fleet.metrics.auc: stat_pos has {pos_hist.size} buckets, stat_neg {neg_hist.size}"
        )
    pos = np.concatenate([[0.0], np.cumsum(pos_hist)])
    neg = np.concatenate([[0.0], np.cumsum(neg_hist)])
    area = float(np.sum((neg[1:] - neg[:-1]) * (pos[1:] + pos[:-1]) / 2.0))
    if pos[-1] == 0 or neg[-1] == 0:
        return 0.5
    return area / (pos[-1] * neg[-1])


def auc(stat_pos: Any, stat_neg: Any, scope: Any = None, util: Any = None) -> float:
    """The AUC of every worker's predictions pooled, from the AUC op's histograms (each worker
    its own) summed over the workers."""
    pos = _reduce(stat_pos, "sum", scope, util)
    neg = _reduce(stat_neg, "sum", scope, util)
    return auc_of_histograms(pos, neg)


__all__ = ["acc", "auc", "auc_of_histograms", "mae", "max", "min", "mse", "rmse", "sum"]
