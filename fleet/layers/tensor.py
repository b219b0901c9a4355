"""Tensor manipulation layers: creation, assignment, concat/split, reshape, cast, sums."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from fleet._dtypes import FLOAT32, FLOAT64, to_dtype
from fleet.errors import InvalidArgument
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


def fill_constant_batch_size_like(
    input: Variable,
    shape: Sequence[int],
    dtype: Any,
    value: float,
    input_dim_idx: int = 0,
    output_dim_idx: int = 0,
) -> Variable:
    """A constant of `shape` whose dimension output_dim_idx is input's dimension input_dim_idx
    at run time (the batch size)."""
    helper = LayerHelper("fill_constant_batch_size_like")
    out = helper.create_variable(to_dtype(dtype), stop_gradient=True)
    helper.append_op(
        "fill_constant_batch_size_like",
        inputs={"Input": input},
        outputs={"Out": out},
        attrs={
            "shape": [int(d) for d in shape],
            "dtype": to_dtype(dtype),
            "value": float(value),
            "input_dim_idx": int(input_dim_idx),
            "output_dim_idx": int(output_dim_idx),
        },
    )
    return out


def create_tensor(dtype: Any, name: str | None = None, persistable: bool = False) -> Variable:
    """An empty variable for a later layer (assign, fill_constant) to write."""
    helper = LayerHelper("create_tensor", name)
    if name is not None:
        return helper.block.create_var(name, dtype=to_dtype(dtype), persistable=persistable)
    return helper.create_variable(to_dtype(dtype), persistable=persistable)


def assign(input: Variable | np.ndarray, output: Variable | None = None) -> Variable:
    """Copies a variable (assign op, with a gradient) or a NumPy array (assign_value op) into
    `output`, a new variable when None."""
    helper = LayerHelper("assign")
    if isinstance(input, Variable):
        output = output or helper.create_variable(input.dtype)
        helper.append_op("assign", inputs={"X": input}, outputs={"Out": output})
        return output
    array = np.asarray(input)
    dtype = to_dtype(array.dtype)
    if array.size == 0:
        raise InvalidArgument(f"assign: the array to assign is empty (shape {array.shape})")
    if dtype in (FLOAT32, FLOAT64):
        values = {"fp32_values": [float(v) for v in array.reshape(-1)]}
    else:
        values = {"int64_values": [int(v) for v in array.reshape(-1)]}
    output = output or helper.create_variable(dtype, stop_gradient=True)
    helper.append_op(
        "assign_value",
        outputs={"Out": output},
        attrs={"shape": list(array.shape) or [1], "dtype": dtype, **values},
    )
    return output


def create_global_var(
    shape: Sequence[int],
    value: float,
    dtype: Any,
    persistable: bool = False,
    force_cpu: bool = False,
    name: str | None = None,
) -> Variable:
    """A variable of the main program that the startup program fills with `value` once, so it
    keeps what ops write to it across runs when persistable (a step counter, say)."""
    helper = LayerHelper("global_var", name)
    dtype = to_dtype(dtype)
    shape = [int(d) for d in shape]
    var_name = name or helper.main.unique_name("global_var")
    var = helper.block.create_var(
        var_name, shape=shape, dtype=dtype, persistable=persistable, stop_gradient=True
    )
    startup = helper.startup.global_block()
    if not startup.has_var(var_name):
        svar = startup.create_var(var_name, shape=shape, dtype=dtype, persistable=persistable)
        startup.append_op(
            "fill_constant",
            outputs={"Out": svar},
            attrs={"shape": shape, "dtype": dtype, "value": float(value)},
        )
    return var
