"""ParamAttr: how a layer's parameter is named, initialised and trained."""

from __future__ import annotations

import dataclasses
from typing import Any

from fleet.errors import InvalidArgument
from fleet.initializer import Initializer


@dataclasses.dataclass
class ParamAttr:
    name: str | None = None
    initializer: Initializer | None = None
    learning_rate: float = 1.0
    regularizer: Any = None
    trainable: bool = True

    @staticmethod
    def of(value: Any) -> "ParamAttr | None":
        """Normalises a layer's param_attr argument: None, a ParamAttr, a name, or False
        (no parameter, e.g. bias_attr=False)."""
        if value is False:
            return None
        if value is None or value is True:
            return ParamAttr()
        if isinstance(value, str):
            return ParamAttr(name=value)
        if isinstance(value, Initializer):
            return ParamAttr(initializer=value)
        if isinstance(value, ParamAttr):
            return value
        raise InvalidArgument(
            f"param_attr must be None, False, a name, an Initializer or a "
            f"ParamAttr, got {type(value).__name__}"
        )
