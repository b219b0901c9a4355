"""Arithmetic layers: element-wise ops with broadcasting, comparisons, scale, matmul,
reductions."""

from __future__ import annotations

from typing import Sequence

from fleet._dtypes import BOOL
from fleet.framework import Variable
from fleet.layers.helper import LayerHelper


def _elementwise(
    op_type: str, x: Variable, y: Variable, axis: int, act: str | None, name: str | None
) -> Variable:
    helper = LayerHelper(op_type, name)
    out = helper.create_variable(x.dtype)
    helper.append_op(op_type, inputs={"X": x, "Y": y}, outputs={"Out": out}, attrs={"axis": axis})
    return helper.append_activation(out, act)


def elementwise_add(
    x: Variable, y: Variable, axis: int = -1, act: str | None = None, name: str | None = None
) -> Variable:
    return _elementwise("elementwise_add", x, y, axis, act, name)


def elementwise_sub(
    x: Variable, y: Variable, axis: int = -1, act: str | None = None, name: str | None = None
) -> Variable:
    return _elementwise("elementwise_sub", x, y, axis, act, name)


def elementwise_mul(
    x: Variable, y: Variable, axis: int = -1, act: str | None = None, name: str | None = None
) -> Variable:
    return _elementwise("elementwise_mul", x, y, axis, act, name)


def elementwise_div(
    x: Variable, y: Variable, axis: int = -1, act: str | None = None, name: str | None = None
) -> Variable:
    return _elementwise("elementwise_div", x, y, axis, act, name)


def _compare(op_type: str, x: Variable, y: Variable, cond: Variable | None) -> Variable:
    helper = LayerHelper(op_type)
    out = cond or helper.create_variable(BOOL, stop_gradient=True)
    helper.append_op(op_type, inputs={"X": x, "Y": y}, outputs={"Out": out}, attrs={"axis": -1})
    return out


def less_than(
    x: Variable, y: Variable, force_cpu: bool | None = None, cond: Variable | None = None
) -> Variable:
    return _compare("less_than", x, y, cond)


def less_equal(x: Variable, y: Variable, cond: Variable | None = None) -> Variable:
    return _compare("less_equal", x, y, cond)


def greater_than(x: Variable, y: Variable, cond: Variable | None = None) -> Variable:
    return _compare("greater_than", x, y, cond)


def greater_equal(x: Variable, y: Variable, cond: Variable | None = None) -> Variable:
    return _compare("greater_equal", x, y, cond)


def equal(x: Variable, y: Variable, cond: Variable | None = None) -> Variable:
    return _compare("equal", x, y, cond)


def not_equal(x: Variable, y: Variable, cond: Variable | None = None) -> Variable:
    return _compare("not_equal", x, y, cond)


def scale(
    x: Variable,
    scale: float = 1.0,
    bias: float = 0.0,
    bias_after_scale: bool = True,
    act: str | None = None,
    name: str | None = None,
) -> Variable:
    helper = LayerHelper("scale", name)
    out = helper.unary(
        "scale",
        x,
        {"scale": float(scale), "bias": float(bias), "bias_after_scale": bias_after_scale},
    )
    return helper.append_activation(out, act)


def mul(
    x: Variable,
    y: Variable,
    x_num_col_dims: int = 1,
    y_num_col_dims: int = 1,
    name: str | None = None,
) -> Variable:
    helper = LayerHelper("mul", name)
    out = helper.create_variable(x.dtype)
    helper.append_op(
        "mul",
        inputs={"X": x, "Y": y},
        outputs={"Out": out},
        attrs={"x_num_col_dims": x_num_col_dims, "y_num_col_dims": y_num_col_dims},
    )
    return out


def matmul(
    x: Variable,
    y: Variable,
    transpose_x: bool = False,
    transpose_y: bool = False,
    alpha: float = 1.0,
    name: str | None = None,
) -> Variable:
    helper = LayerHelper("matmul", name)
    out = helper.create_variable(x.dtype)
    helper.append_op(
        "matmul",
        inputs={"X": x, "Y": y},
        outputs={"Out": out},
        attrs={"transpose_X": transpose_x, "transpose_Y": transpose_y, "alpha": float(alpha)},
    )
    return out


def mean(x: Variable, name: str | None = None) -> Variable:
    return LayerHelper("mean", name).unary("mean", x)


def _reduce(
    op_type: str, input: Variable, dim: int | Sequence[int] | None, keep_dim: bool, name: str | None
) -> Variable:
    dims = [] if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    return LayerHelper(op_type, name).unary(
        op_type, input, {"dim": dims, "keep_dim": keep_dim, "reduce_all": dim is None}
    )


def reduce_sum(
    input: Variable,
    dim: int | Sequence[int] | None = None,
    keep_dim: bool = False,
    name: str | None = None,
) -> Variable:
    return _reduce("reduce_sum", input, dim, keep_dim, name)


def reduce_mean(
    input: Variable,
    dim: int | Sequence[int] | None = None,
    keep_dim: bool = False,
    name: str | None = None,
) -> Variable:
    return _reduce("reduce_mean", input, dim, keep_dim, name)
