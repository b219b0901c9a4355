"""Paddle 2.x tensor functions in static mode (`paddle.concat`, `paddle.reshape`, `paddle.sum`,
...), over the fluid layers; `fleet/__init__.py` re-exports them at the top level so that model
code written against `import paddle` runs under `import fleet as paddle`."""

from __future__ import annotations

from typing import Any, Sequence

from fleet import layers
from fleet._dtypes import to_dtype
from fleet.errors import InvalidArgument
from fleet.framework import Variable


def concat(x: Sequence[Variable], axis: int = 0, name: str | None = None) -> Variable:
    return layers.concat(list(x), axis=axis, name=name)


def reshape(x: Variable, shape: Sequence[int], name: str | None = None) -> Variable:
    return layers.reshape(x, [int(d) for d in shape], name=name)


def cast(x: Variable, dtype: Any) -> Variable:
    return layers.cast(x, dtype)


def _axes(axis: int | Sequence[int] | None) -> int | list[int] | None:
    return axis if axis is None or isinstance(axis, int) else list(axis)


def sum(  # noqa: A001 - Paddle's name
    x: Variable,
    axis: int | Sequence[int] | None = None,
    dtype: Any = None,
    keepdim: bool = False,
    name: str | None = None,
) -> Variable:
    out = layers.reduce_sum(x, _axes(axis), keepdim, name)
    return out if dtype is None else layers.cast(out, dtype)


def mean(
    x: Variable,
    axis: int | Sequence[int] | None = None,
    keepdim: bool = False,
    name: str | None = None,
) -> Variable:
    if axis is None and not keepdim:
        return layers.mean(x, name)
    return layers.reduce_mean(x, _axes(axis), keepdim, name)


def matmul(
    x: Variable,
    y: Variable,
    transpose_x: bool = False,
    transpose_y: bool = False,
    name: str | None = None,
) -> Variable:
    return layers.matmul(x, y, transpose_x, transpose_y, name=name)


def bmm(x: Variable, y: Variable, name: str | None = None) -> Variable:
    return layers.matmul(x, y, name=name)


def add(x: Variable, y: Variable, name: str | None = None) -> Variable:
    return layers.elementwise_add(x, y, name=name)


def subtract(x: Variable, y: Variable, name: str | None = None) -> Variable:
    return layers.elementwise_sub(x, y, name=name)


def multiply(x: Variable, y: Variable, name: str | None = None) -> Variable:
    return layers.elementwise_mul(x, y, name=name)


def divide(x: Variable, y: Variable, name: str | None = None) -> Variable:
    return layers.elementwise_div(x, y, name=name)


def scale(
    x: Variable, scale: float = 1.0, bias: float = 0.0, bias_after_scale: bool = True
) -> Variable:
    return layers.scale(x, scale, bias, bias_after_scale)


def square(x: Variable, name: str | None = None) -> Variable:
    return layers.elementwise_mul(x, x, name=name)


def _static_shape(x: Variable, what: str) -> list[int]:
    shape = list(x.shape)
    if _count_unknown(shape) > 1:
        raise InvalidArgument(
            f"{what} of '{x.name}' (shape {shape}): only one dimension may be unknown (-1)"
        )
    return shape


def _count_unknown(shape: Sequence[int]) -> int:
    return len([d for d in shape if d < 0])


def unsqueeze(x: Variable, axis: int | Sequence[int], name: str | None = None) -> Variable:
    """A reshape that inserts dimensions of size 1 at `axis` (of the output)."""
    shape = _static_shape(x, "unsqueeze")
    for a in [axis] if isinstance(axis, int) else list(axis):
        shape.insert(a if a >= 0 else len(shape) + 1 + a, 1)
    return layers.reshape(x, shape, name=name)


def squeeze(x: Variable, axis: int | Sequence[int] | None = None, name: str | None = None):  # noqa: ANN201
    """A reshape that drops dimensions of size 1 (all of them, or those at `axis`)."""
    shape = _static_shape(x, "squeeze")
    rank = len(shape)
    axes = (
        [i for i, d in enumerate(shape) if d == 1]
        if axis is None
        else [a % rank for a in ([axis] if isinstance(axis, int) else axis)]
    )
    return layers.reshape(
        x, [d for i, d in enumerate(shape) if not (i in axes and d == 1)], name=name
    )


def flatten(x: Variable, start_axis: int = 0, stop_axis: int = -1, name: str | None = None):  # noqa: ANN201
    shape = _static_shape(x, "flatten")
    stop = stop_axis % len(shape)
    merged = shape[start_axis : stop + 1]
    width = -1 if any(d < 0 for d in merged) else int(_product(merged))
    return layers.reshape(x, shape[:start_axis] + [width] + shape[stop + 1 :], name=name)


def _product(values: Sequence[int]) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def split(
    x: Variable, num_or_sections: int | Sequence[int], axis: int = 0, name: str | None = None
) -> list[Variable]:
    return layers.split(x, num_or_sections, dim=axis, name=name)


def full(shape: Sequence[int], fill_value: float, dtype: Any = "float32") -> Variable:
    return layers.fill_constant(list(shape), to_dtype(dtype), fill_value)


def full_like(x: Variable, fill_value: float, dtype: Any = None, name: str | None = None):  # noqa: ANN201
    """A variable of x's shape (batch size included) holding `fill_value`; no gradient flows
    through it."""
    out = layers.scale(x, 0.0, float(fill_value))
    out.stop_gradient = True
    return out if dtype is None or to_dtype(dtype) == x.dtype else layers.cast(out, dtype)


def ones(shape: Sequence[int], dtype: Any = "float32") -> Variable:
    return full(shape, 1.0, dtype)


def zeros(shape: Sequence[int], dtype: Any = "float32") -> Variable:
    return full(shape, 0.0, dtype)


__all__ = [
    "add",
    "bmm",
    "cast",
    "concat",
    "divide",
    "flatten",
    "full",
    "full_like",
    "matmul",
    "mean",
    "multiply",
    "ones",
    "reshape",
    "scale",
    "split",
    "square",
    "squeeze",
    "subtract",
    "sum",
    "unsqueeze",
    "zeros",
]
