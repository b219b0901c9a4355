"""Metric layers: accuracy and streaming AUC."""

from __future__ import annotations

from fleet._dtypes import FLOAT32, INT64
from fleet.errors import InvalidArgument
from fleet.framework import Variable
from fleet.layers.helper import LayerHelper


def accuracy(
    input: Variable,
    label: Variable,
    k: int = 1,
    correct: Variable | None = None,
    total: Variable | None = None,
) -> Variable:
    """Top-k accuracy of `input`, one score per class in each row, against int64 labels."""
    if input.shape and input.shape[-1] == 1:
        raise InvalidArgument(
            f"accuracy: input '{input.name}' has shape {list(input.shape)}, one column; it needs "
            "one column per class (e.g. a softmax over 2 classes for a binary label). For a "
            "single sigmoid probability, use layers.auc, or concatenate 1 - p and p"
        )
    helper = LayerHelper("accuracy")
    acc = helper.create_variable(FLOAT32, stop_gradient=True)
    correct = correct or helper.create_variable(INT64, suffix="correct", stop_gradient=True)
    total = total or helper.create_variable(INT64, suffix="total", stop_gradient=True)
    helper.append_op(
        "accuracy",
        inputs={"Out": input, "Label": label},
        outputs={"Accuracy": acc, "Correct": correct, "Total": total},
        attrs={"k": k},
    )
    return acc


def _stat_var(helper: LayerHelper, suffix: str, size: int, persistable: bool) -> Variable:
    var = helper.create_variable(
        INT64, suffix=suffix, shape=[size], persistable=persistable, stop_gradient=True
    )
    if persistable:
        # Zeroed once by the startup program; accumulates across runs (and, in distributed
        # jobs, can be summed across workers).
        startup = helper.startup.global_block()
        sv = startup.create_var(var.name, shape=[size], dtype=INT64, persistable=True)
        startup.append_op(
            "fill_constant",
            outputs={"Out": sv},
            attrs={"shape": [size], "dtype": INT64, "value": 0.0},
        )
    else:
        helper.append_op(
            "fill_constant",
            outputs={"Out": var},
            attrs={"shape": [size], "dtype": INT64, "value": 0.0},
        )
    return var


def auc(
    input: Variable,
    label: Variable,
    curve: str = "ROC",
    num_thresholds: int = 2**12 - 1,
    topk: int = 1,
    slide_steps: int = 1,
):  # noqa: ANN201
    """Streaming AUC over all batches run so far, plus the AUC of the current batch.

    Returns (auc, batch_auc, [batch_stat_pos, batch_stat_neg, stat_pos, stat_neg]) as fluid
    does. The global statistics are persistable int64 histograms of num_thresholds + 1 bins."""
    helper = LayerHelper("auc")
    size = num_thresholds + 1
    outputs = []
    stats = []
    for persistable, prefix in ((False, "batch_"), (True, "")):
        pos = _stat_var(helper, f"{prefix}stat_pos", size, persistable)
        neg = _stat_var(helper, f"{prefix}stat_neg", size, persistable)
        out = helper.create_variable(FLOAT32, suffix=f"{prefix}auc", stop_gradient=True)
        helper.append_op(
            "auc",
            inputs={"Predict": input, "Label": label, "StatPos": pos, "StatNeg": neg},
            outputs={"AUC": out, "StatPosOut": pos, "StatNegOut": neg},
            attrs={"curve": curve, "num_thresholds": num_thresholds, "slide_steps": 0},
        )
        outputs.append(out)
        stats.extend([pos, neg])
    batch_auc, global_auc = outputs
    return global_auc, batch_auc, stats
