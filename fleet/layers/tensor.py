"""Tensor manipulation layers: creation, concat/split, reshape, cast, sums."""

from __future__ import annotations

from typing import Any, Sequence

from fleet._dtypes import to_dtype
from fleet.framework import Variable
from fleet.layers.helper import LayerHelper


def fill_constant(
    shape: Sequence[int],
    dtype: Any,
    value: float,
    persistable: bool = False,
    out: Variable | None = None,
) -> Variable:
    helper = LayerHelper("fill_constant")
    dtype = to_dtype(dtype)
    out = out or helper.create_variable(dtype, persistable=persistable, stop_gradient=True)
    helper.append_op(
        "fill_constant",
        outputs={"Out": out},
        attrs={"shape": [int(d) for d in shape], "dtype": dtype, "value": float(value)},
    )
    return out


def uniform_random(
    shape: Sequence[int], dtype: Any = "float32", min: float = -1.0, max: float = 1.0, seed: int = 0
) -> Variable:
    helper = LayerHelper("uniform_random")
    out = helper.create_variable(to_dtype(dtype), stop_gradient=True)
    helper.append_op(
        "uniform_random",
        outputs={"Out": out},
        attrs={
            "shape": [int(d) for d in shape],
            "dtype": to_dtype(dtype),
            "min": float(min),
            "max": float(max),
            "seed": seed,
        },
    )
    return out


def gaussian_random(
    shape: Sequence[int], mean: float = 0.0, std: float = 1.0, seed: int = 0, dtype: Any = "float32"
) -> Variable:
    helper = LayerHelper("gaussian_random")
    out = helper.create_variable(to_dtype(dtype), stop_gradient=True)
    helper.append_op(
        "gaussian_random",
        outputs={"Out": out},
        attrs={
            "shape": [int(d) for d in shape],
            "dtype": to_dtype(dtype),
            "mean": float(mean),
            "std": float(std),
            "seed": seed,
        },
    )
    return out


def concat(input: Sequence[Variable], axis: int = 0, name: str | None = None) -> Variable:
    helper = LayerHelper("concat", name)
    out = helper.create_variable(input[0].dtype)
    helper.append_op(
        "concat", inputs={"X": list(input)}, outputs={"Out": out}, attrs={"axis": axis}
    )
    return out


def split(
    input: Variable, num_or_sections: int | Sequence[int], dim: int = -1, name: str | None = None
) -> list[Variable]:
    helper = LayerHelper("split", name)
    if isinstance(num_or_sections, int):
        count, attrs = num_or_sections, {"num": num_or_sections, "axis": dim}
    else:
        sections = [int(s) for s in num_or_sections]
        count, attrs = len(sections), {"sections": sections, "num": 0, "axis": dim}
    outs = [helper.create_variable(input.dtype) for _ in range(count)]
    helper.append_op("split", inputs={"X": input}, outputs={"Out": outs}, attrs=attrs)
    return outs


def reshape(x: Variable, shape: Sequence[int], name: str | None = None) -> Variable:
    return LayerHelper("reshape", name).unary("reshape", x, {"shape": [int(d) for d in shape]})


def cast(x: Variable, dtype: Any) -> Variable:
    out_dtype = to_dtype(dtype)
    return LayerHelper("cast").unary(
        "cast", x, {"in_dtype": x.dtype, "out_dtype": out_dtype}, out_dtype=out_dtype
    )


def sums(input: Sequence[Variable], out: Variable | None = None) -> Variable:
    helper = LayerHelper("sum")
    out = out or helper.create_variable(input[0].dtype)
    helper.append_op("sum", inputs={"X": list(input)}, outputs={"Out": out})
    return out


def zeros_like(x: Variable) -> Variable:
    return LayerHelper("fill_zeros_like").unary("fill_zeros_like", x)
