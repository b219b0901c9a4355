"""Fleet dtype numbering (matches csrc/core/dtype.h and VarDesc.dtype) and NumPy mapping."""

from __future__ import annotations

from typing import Any

import numpy as np

from fleet.errors import InvalidArgument

FLOAT32, FLOAT64, INT32, INT64, BOOL = 0, 1, 2, 3, 4

_BY_NAME = {"float32": FLOAT32, "float64": FLOAT64, "int32": INT32, "int64": INT64, "bool": BOOL}
_NUMPY = {
    FLOAT32: np.float32,
    FLOAT64: np.float64,
    INT32: np.int32,
    INT64: np.int64,
    BOOL: np.bool_,
}
_NAMES = {v: k for k, v in _BY_NAME.items()}


def to_dtype(value: Any) -> int:
    """Accepts 'float32', np.float32, np.dtype('float32') or a dtype number."""
    if isinstance(value, int) and value in _NAMES:
        return value
    try:
        name = np.dtype(value).name
    except TypeError as exc:
        raise InvalidArgument(f"unknown dtype {value!r}") from exc
    if name not in _BY_NAME:
        raise InvalidArgument(f"dtype {name} is not supported; use one of {sorted(_BY_NAME)}")
    return _BY_NAME[name]


def dtype_name(dtype: int) -> str:
    return _NAMES[dtype]


def numpy_dtype(dtype: int) -> type:
    return _NUMPY[dtype]
