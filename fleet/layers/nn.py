"""Neural-network layers: fc, embedding, sequence pooling, dropout, softmax, activations, clip,
l2_normalize, topk and one_hot."""

from __future__ import annotations

from typing import Any, Sequence

from fleet import initializer as init
from fleet._dtypes import FLOAT32, INT32, INT64, to_dtype
from fleet.errors import InvalidArgument
from fleet.framework import Variable
from fleet.layers.helper import LayerHelper
from fleet.param_attr import ParamAttr


def fc(
    input: Variable | Sequence[Variable],
    size: int,
    num_flatten_dims: int = 1,
    param_attr: Any = None,
    bias_attr: Any = None,
    act: str | None = None,
    name: str | None = None,
) -> Variable:
    """Fully connected: act(sum_i flatten(input_i) @ W_i + b). Dimensions from
    num_flatten_dims on are flattened into the input width, as in fluid."""
    helper = LayerHelper("fc", name)
    inputs = list(input) if isinstance(input, (list, tuple)) else [input]
    attrs = param_attr if isinstance(param_attr, (list, tuple)) else [param_attr] * len(inputs)
    products = []
    for x, attr in zip(inputs, attrs):
        width = 1
        for d in x.shape[num_flatten_dims:]:
            if d < 0:
                raise InvalidArgument(
                    f"fc '{helper.name}': input '{x.name}' has shape "
                    f"{list(x.shape)}; dimensions after num_flatten_dims="
                    f"{num_flatten_dims} must be known"
                )
            width *= d
        w = helper.create_parameter(ParamAttr.of(attr), [width, size], x.dtype)
        out = helper.create_variable(x.dtype)
        helper.append_op(
            "mul",
            inputs={"X": x, "Y": w},
            outputs={"Out": out},
            attrs={"x_num_col_dims": num_flatten_dims, "y_num_col_dims": 1},
        )
        products.append(out)
    pre_bias = products[0]
    if len(products) > 1:
        pre_bias = helper.create_variable(products[0].dtype)
        helper.append_op("sum", inputs={"X": products}, outputs={"Out": pre_bias})
    bias = ParamAttr.of(bias_attr)
    if bias is not None:
        b = helper.create_parameter(
            bias,
            [size],
            pre_bias.dtype,
            default_initializer=init.ConstantInitializer(0.0),
            suffix="b",
        )
        biased = helper.create_variable(pre_bias.dtype)
        helper.append_op(
            "elementwise_add",
            inputs={"X": pre_bias, "Y": b},
            outputs={"Out": biased},
            attrs={"axis": num_flatten_dims},
        )
        pre_bias = biased
    return helper.append_activation(pre_bias, act)


def embedding(
    input: Variable,
    size: Sequence[int],
    is_sparse: bool = False,
    is_distributed: bool = False,
    padding_idx: int | None = None,
    param_attr: Any = None,
    dtype: Any = "float32",
) -> Variable:
    """Looks up rows of a [vocab, dim] table for int64 ids. With is_sparse the table's gradient
    is a SelectedRows holding only the rows seen in the batch."""
    helper = LayerHelper("embedding")
    vocab, dim = int(size[0]), int(size[1])
    w = helper.create_parameter(
        ParamAttr.of(param_attr),
        [vocab, dim],
        to_dtype(dtype),
        default_initializer=init.XavierInitializer(),
    )
    if padding_idx is None:
        padding = -1
    else:
        padding = padding_idx if padding_idx >= 0 else vocab + padding_idx
    out = helper.create_variable(to_dtype(dtype))
    helper.append_op(
        "lookup_table",
        inputs={"W": w, "Ids": input},
        outputs={"Out": out},
        attrs={"is_sparse": is_sparse, "is_distributed": is_distributed, "padding_idx": padding},
    )
    return out


def sequence_pool(
    input: Variable, pool_type: str, is_test: bool = False, pad_value: float = 0.0
) -> Variable:
    """Pools each sequence of a lod_level-1 input: sum, average, sqrt or max."""
    helper = LayerHelper("sequence_pool")
    out = helper.create_variable(input.dtype)
    outputs = {"Out": out}
    if pool_type.upper() == "MAX":
        outputs["MaxIndex"] = helper.create_variable(INT32, suffix="max_index", stop_gradient=True)
    helper.append_op(
        "sequence_pool",
        inputs={"X": input},
        outputs=outputs,
        attrs={"pooltype": pool_type.upper(), "is_test": is_test, "pad_value": float(pad_value)},
    )
    return out


def dropout(
    x: Variable,
    dropout_prob: float,
    is_test: bool = False,
    seed: int | None = None,
    dropout_implementation: str = "downgrade_in_infer",
) -> Variable:
    helper = LayerHelper("dropout")
    out = helper.create_variable(x.dtype)
    mask = helper.create_variable(FLOAT32, suffix="mask", stop_gradient=True)
    helper.append_op(
        "dropout",
        inputs={"X": x},
        outputs={"Out": out, "Mask": mask},
        attrs={
            "dropout_prob": float(dropout_prob),
            "is_test": is_test,
            "fix_seed": seed is not None,
            "seed": seed or 0,
            "dropout_implementation": dropout_implementation,
        },
    )
    return out


def softmax(input: Variable, name: str | None = None) -> Variable:
    return LayerHelper("softmax", name).unary("softmax", input)


def relu(x: Variable, name: str | None = None) -> Variable:
    return LayerHelper("relu", name).unary("relu", x)


def sigmoid(x: Variable, name: str | None = None) -> Variable:
    return LayerHelper("sigmoid", name).unary("sigmoid", x)


def tanh(x: Variable, name: str | None = None) -> Variable:
    return LayerHelper("tanh", name).unary("tanh", x)


def clip(x: Variable, min: float, max: float, name: str | None = None) -> Variable:
    """Each value bounded to [min, max]; the gradient is zero where a value was clipped."""
    if min > max:
        raise InvalidArgument(f"clip: min ({min}) must not exceed max ({max})")
    return LayerHelper("clip", name).unary("clip", x, {"min": float(min), "max": float(max)})


def l2_normalize(
    x: Variable, axis: int, epsilon: float = 1e-12, name: str | None = None
) -> Variable:
    """x / sqrt(sum(x^2 along axis) + epsilon), through the norm op as in fluid."""
    helper = LayerHelper("l2_normalize", name)
    out = helper.create_variable(x.dtype)
    norm = helper.create_variable(x.dtype, suffix="norm")
    helper.append_op(
        "norm",
        inputs={"X": x},
        outputs={"Out": out, "Norm": norm},
        attrs={"axis": 1 if len(x.shape) == 1 else int(axis), "epsilon": float(epsilon)},
    )
    return out


def topk(input: Variable, k: int, name: str | None = None):  # noqa: ANN201
    """(values, indices) of the k largest entries of each row (the last dimension), largest
    first; indices are int64."""
    helper = LayerHelper("top_k", name)
    values = helper.create_variable(input.dtype)
    indices = helper.create_variable(INT64, suffix="indices", stop_gradient=True)
    helper.append_op(
        "top_k",
        inputs={"X": input},
        outputs={"Out": values, "Indices": indices},
        attrs={"k": int(k)},
    )
    return values, indices


def one_hot(input: Variable, depth: int, allow_out_of_range: bool = False) -> Variable:
    """Int ids of shape [..., 1] to float32 rows of shape [..., depth] with a 1 at each id."""
    helper = LayerHelper("one_hot")
    out = helper.create_variable(FLOAT32, stop_gradient=True)
    helper.append_op(
        "one_hot",
        inputs={"X": input},
        outputs={"Out": out},
        attrs={"depth": int(depth), "allow_out_of_range": bool(allow_out_of_range)},
    )
    return out
