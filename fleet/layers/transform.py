"""Layers that rearrange a tensor's elements: transpose, expand, slice, squeeze, unsqueeze."""

from __future__ import annotations

from typing import Sequence

from fleet.framework import Variable
from fleet.layers.helper import LayerHelper


def _ints(values: Sequence[int]) -> list[int]:
    return [int(v) for v in values]


def transpose(x: Variable, perm: Sequence[int], name: str | None = None) -> Variable:
    """Out's dimension i is x's dimension perm[i]."""
    return LayerHelper("transpose", name).unary("transpose", x, {"axis": _ints(perm)})


def expand(x: Variable, expand_times: Sequence[int], name: str | None = None) -> Variable:
    """Tiles x expand_times[i] times along dimension i."""
    return LayerHelper("expand", name).unary("expand", x, {"expand_times": _ints(expand_times)})


def slice(
    input: Variable, axes: Sequence[int], starts: Sequence[int], ends: Sequence[int]
) -> Variable:
    """The window [starts[i], ends[i]) along each of `axes` (negative bounds count from the
    end; bounds past a dimension are clamped to it)."""
    helper = LayerHelper("slice")
    out = helper.create_variable(input.dtype)
    helper.append_op(
        "slice",
        inputs={"Input": input},
        outputs={"Out": out},
        attrs={"axes": _ints(axes), "starts": _ints(starts), "ends": _ints(ends)},
    )
    return out


def squeeze(input: Variable, axes: Sequence[int], name: str | None = None) -> Variable:
    """Drops the dimensions of size 1 listed in `axes` (all of them when empty)."""
    return LayerHelper("squeeze", name).unary("squeeze", input, {"axes": _ints(axes)})


def unsqueeze(input: Variable, axes: int | Sequence[int], name: str | None = None) -> Variable:
    """Inserts dimensions of size 1 at `axes`, each an index into the shape grown so far."""
    axes = [axes] if isinstance(axes, int) else axes
    return LayerHelper("unsqueeze", name).unary("unsqueeze", input, {"axes": _ints(axes)})
