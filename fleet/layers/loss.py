"""Loss layers."""

from __future__ import annotations

from fleet.framework import Variable
from fleet.layers.helper import LayerHelper


def cross_entropy(
    input: Variable, label: Variable, soft_label: bool = False, ignore_index: int = -100
) -> Variable:
    helper = LayerHelper("cross_entropy")
    out = helper.create_variable(input.dtype)
    helper.append_op(
        "cross_entropy",
        inputs={"X": input, "Label": label},
        outputs={"Y": out},
        attrs={"soft_label": soft_label, "ignore_index": ignore_index},
    )
    return out


def softmax_with_cross_entropy(
    logits: Variable,
    label: Variable,
    soft_label: bool = False,
    ignore_index: int = -100,
    return_softmax: bool = False,
):  # noqa: ANN201
    helper = LayerHelper("softmax_with_cross_entropy")
    softmax = helper.create_variable(logits.dtype, suffix="softmax")
    loss = helper.create_variable(logits.dtype, suffix="loss")
    helper.append_op(
        "softmax_with_cross_entropy",
        inputs={"Logits": logits, "Label": label},
        outputs={"Softmax": softmax, "Loss": loss},
        attrs={"soft_label": soft_label, "ignore_index": ignore_index},
    )
    return (loss, softmax) if return_softmax else loss


def sigmoid_cross_entropy_with_logits(
    x: Variable, label: Variable, ignore_index: int = -100, normalize: bool = False
) -> Variable:
    helper = LayerHelper("sigmoid_cross_entropy_with_logits")
    out = helper.create_variable(x.dtype)
    helper.append_op(
        "sigmoid_cross_entropy_with_logits",
        inputs={"X": x, "Label": label},
        outputs={"Out": out},
        attrs={"ignore_index": ignore_index, "normalize": normalize},
    )
    return out


def log_loss(input: Variable, label: Variable, epsilon: float = 1e-4) -> Variable:
    helper = LayerHelper("log_loss")
    out = helper.create_variable(input.dtype)
    helper.append_op(
        "log_loss",
        inputs={"Predicted": input, "Labels": label},
        outputs={"Loss": out},
        attrs={"epsilon": float(epsilon)},
    )
    return out
