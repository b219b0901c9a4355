"""paddle.nn.functional in static mode: each function appends ops to the default main program.

Losses take Paddle 2.x's `reduction` ('mean', 'sum' or 'none')."""

from __future__ import annotations

from typing import Any

from fleet import layers
from fleet._dtypes import FLOAT32
from fleet.errors import InvalidArgument
from fleet.framework import Variable
from fleet.layers.helper import LayerHelper


def relu(x: Variable, name: str | None = None) -> Variable:
    return layers.relu(x, name)


def sigmoid(x: Variable, name: str | None = None) -> Variable:
    return layers.sigmoid(x, name)


def tanh(x: Variable, name: str | None = None) -> Variable:
    return layers.tanh(x, name)


def softmax(x: Variable, axis: int = -1, dtype: Any = None, name: str | None = None) -> Variable:
    if axis not in (-1, len(x.shape) - 1):
        raise InvalidArgument(f"softmax of '{x.name}': only the last axis is supported, got {axis}")
    return layers.softmax(x, name)


def dropout(
    x: Variable, p: float = 0.5, training: bool = True, mode: str = "upscale_in_train"
) -> Variable:
    if p == 0.0:
        return x
    return layers.dropout(x, p, is_test=not training, dropout_implementation=mode)


def linear(x: Variable, weight: Variable, bias: Variable | None = None) -> Variable:
    """x @ weight (+ bias); weight is [in_features, out_features] as Paddle stores it."""
    helper = LayerHelper("linear")
    out = helper.create_variable(x.dtype)
    helper.append_op(
        "mul",
        inputs={"X": x, "Y": weight},
        outputs={"Out": out},
        attrs={"x_num_col_dims": len(x.shape) - 1, "y_num_col_dims": 1},
    )
    if bias is None:
        return out
    return layers.elementwise_add(out, bias, axis=len(x.shape) - 1)


def embedding(
    x: Variable,
    weight: Variable,
    padding_idx: int | None = None,
    sparse: bool = False,
    name: str | None = None,
) -> Variable:
    """Rows of `weight` for the int64 ids `x`: the output's shape is x's shape plus the row
    width (Paddle 2.x's lookup_table_v2), also when x's last dimension is 1."""
    helper = LayerHelper("embedding", name)
    vocab, dim = weight.shape
    padding = (
        -1 if padding_idx is None else (padding_idx if padding_idx >= 0 else vocab + padding_idx)
    )
    rows = helper.create_variable(weight.dtype)
    helper.append_op(
        "lookup_table",
        inputs={"W": weight, "Ids": x},
        outputs={"Out": rows},
        attrs={"is_sparse": sparse, "is_distributed": False, "padding_idx": padding},
    )
    if x.shape and x.shape[-1] == 1 and x.lod_level == 0:
        # fluid's lookup_table drops the trailing 1 of the ids; 2.x keeps it.
        return layers.reshape(rows, [-1 if d < 0 else d for d in x.shape] + [dim])
    return rows


def _reduce(loss: Variable, reduction: str, what: str) -> Variable:
    if reduction == "mean":
        return layers.mean(loss)
    if reduction == "sum":
        return layers.reduce_sum(loss)
    if reduction == "none":
        return loss
    raise InvalidArgument(f"{what}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _float_label(label: Variable) -> Variable:
    return label if label.dtype == FLOAT32 else layers.cast(label, "float32")


def cross_entropy(
    input: Variable,
    label: Variable,
    weight: Variable | None = None,
    ignore_index: int = -100,
    reduction: str = "mean",
    soft_label: bool = False,
    axis: int = -1,
    use_softmax: bool = True,
    name: str | None = None,
) -> Variable:
    """Softmax cross entropy of logits `input` (use_softmax=False: of probabilities)."""
    if weight is not None:
        raise InvalidArgument("cross_entropy: a class weight is not supported")
    if use_softmax:
        loss = layers.softmax_with_cross_entropy(input, label, soft_label, ignore_index)
    else:
        loss = layers.cross_entropy(input, label, soft_label, ignore_index)
    return _reduce(loss, reduction, "cross_entropy")


def binary_cross_entropy(
    input: Variable,
    label: Variable,
    weight: Variable | None = None,
    reduction: str = "mean",
    name: str | None = None,
) -> Variable:
    """-(y log p + (1 - y) log(1 - p)) of probabilities `input`."""
    if weight is not None:
        raise InvalidArgument("binary_cross_entropy: a weight is not supported")
    loss = layers.log_loss(input, _float_label(label), epsilon=1e-7)
    return _reduce(loss, reduction, "binary_cross_entropy")


def binary_cross_entropy_with_logits(
    logit: Variable,
    label: Variable,
    weight: Variable | None = None,
    reduction: str = "mean",
    pos_weight: Variable | None = None,
    name: str | None = None,
) -> Variable:
    if weight is not None or pos_weight is not None:
        raise InvalidArgument("binary_cross_entropy_with_logits: weights are not supported")
    loss = layers.sigmoid_cross_entropy_with_logits(logit, _float_label(label))
    return _reduce(loss, reduction, "binary_cross_entropy_with_logits")


def log_loss(input: Variable, label: Variable, epsilon: float = 1e-4) -> Variable:
    return layers.log_loss(input, _float_label(label), epsilon)
