"""Encoding of Python attribute values into framework.proto OpDesc attributes."""

from __future__ import annotations

from typing import Any

import numpy as np

from fleet.errors import InvalidArgument
from fleet.proto import framework_pb2 as pb

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def encode_attr(attr: pb.OpDesc.Attr, name: str, value: Any) -> None:
    """Fills `attr` with `value`, choosing the narrowest proto type that holds it."""
    attr.name = name
    if isinstance(value, (bool, np.bool_)):
        attr.type, attr.b = pb.BOOLEAN, bool(value)
    elif _is_int(value):
        if _INT32_MIN <= int(value) <= _INT32_MAX:
            attr.type, attr.i = pb.INT, int(value)
        else:
            attr.type, attr.l = pb.LONG, int(value)
    elif isinstance(value, (float, np.floating)):
        attr.type, attr.f = pb.FLOAT, float(value)
    elif isinstance(value, str):
        attr.type, attr.s = pb.STRING, value
    elif isinstance(value, (list, tuple, np.ndarray)):
        items = list(value)
        if all(isinstance(v, (bool, np.bool_)) for v in items) and items:
            attr.type = pb.BOOLEANS
            attr.bools.extend(bool(v) for v in items)
        elif all(_is_int(v) for v in items):
            if all(_INT32_MIN <= int(v) <= _INT32_MAX for v in items):
                attr.type = pb.INTS
                attr.ints.extend(int(v) for v in items)
            else:
                attr.type = pb.LONGS
                attr.longs.extend(int(v) for v in items)
        elif all(isinstance(v, (int, float, np.integer, np.floating)) for v in items):
            attr.type = pb.FLOATS
            attr.floats.extend(float(v) for v in items)
        elif all(isinstance(v, str) for v in items):
            attr.type = pb.STRINGS
            attr.strings.extend(items)
        else:
            raise InvalidArgument(f"attribute '{name}': list {value!r} mixes types")
    else:
        raise InvalidArgument(
            f"attribute '{name}': value {value!r} of type {type(value).__name__} is not "
            "a bool, int, float, str or a list of one of those"
        )


def decode_attr(attr: pb.OpDesc.Attr) -> Any:
    t = attr.type
    if t == pb.INT:
        return attr.i
    if t == pb.FLOAT:
        return attr.f
    if t == pb.STRING:
        return attr.s
    if t == pb.INTS:
        return list(attr.ints)
    if t == pb.FLOATS:
        return list(attr.floats)
    if t == pb.STRINGS:
        return list(attr.strings)
    if t == pb.BOOLEAN:
        return attr.b
    if t == pb.BOOLEANS:
        return list(attr.bools)
    if t == pb.LONG:
        return attr.l
    if t == pb.LONGS:
        return list(attr.longs)
    return attr.block_idx
