"""Input variables of a program."""

from __future__ import annotations

from typing import Any, Sequence

from fleet._dtypes import to_dtype
from fleet.framework import Variable, default_main_program


def data(
    name: str,
    shape: Sequence[int],
    dtype: Any = "float32",
    lod_level: int = 0,
    append_batch_size: bool = True,
    stop_gradient: bool = True,
) -> Variable:
    """fluid.layers.data: declares a fed variable. With append_batch_size (the default, as in
    fluid 1.x) a leading -1 batch dimension is added unless the shape already has a -1."""
    shape = [int(d) for d in shape]
    if append_batch_size and -1 not in shape:
        shape = [-1] + shape
    return (
        default_main_program()
        .global_block()
        .create_var(
            name,
            shape=shape,
            dtype=to_dtype(dtype),
            lod_level=lod_level,
            stop_gradient=stop_gradient,
        )
    )


def static_data(
    name: str, shape: Sequence[int], dtype: Any = "float32", lod_level: int = 0
) -> Variable:
    """fluid.data / paddle.static.data: the shape is used as given (None or -1 = any size)."""
    shape = [-1 if d is None else int(d) for d in shape]
    return data(name, shape, dtype, lod_level, append_batch_size=False)
