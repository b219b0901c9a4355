"""LayerHelper: what every layer function does: make unique names, create parameters in the
main program with their initialisers in the startup program, append ops, apply activations."""

from __future__ import annotations

from typing import Any, Sequence

from fleet import initializer as init
from fleet._dtypes import FLOAT32
from fleet.errors import InvalidArgument
from fleet.framework import (
    Parameter,
    Program,
    Variable,
    default_main_program,
    default_startup_program,
)
from fleet.param_attr import ParamAttr
from fleet.regularizer import check_regularizer


class LayerHelper:
    def __init__(self, layer_type: str, name: str | None = None) -> None:
        self.layer_type = layer_type
        self.main: Program = default_main_program()
        self.startup: Program = default_startup_program()
        self.name = name or self.main.unique_name(layer_type)

    @property
    def block(self):  # noqa: ANN201 - fleet.framework.Block
        return self.main.global_block()

    def create_parameter(
        self,
        attr: ParamAttr,
        shape: Sequence[int],
        dtype: int = FLOAT32,
        default_initializer: init.Initializer | None = None,
        suffix: str = "w",
    ) -> Parameter:
        name = attr.name or self.main.unique_name(f"{self.name}.{suffix}")
        shape = [int(d) for d in shape]
        if any(d <= 0 for d in shape):
            raise InvalidArgument(
                f"parameter '{name}' of layer {self.layer_type} needs positive "
                f"dimensions, got {shape}"
            )
        param = self.block.create_parameter(
            name,
            shape,
            dtype,
            trainable=attr.trainable,
            learning_rate=attr.learning_rate,
            regularizer=check_regularizer(attr.regularizer, f"ParamAttr.regularizer of '{name}'"),
        )
        startup_block = self.startup.global_block()
        if not startup_block.has_var(name):
            var = startup_block.create_var(name, shape=shape, dtype=dtype, persistable=True)
            chosen = init.resolve(attr.initializer, default_initializer or init.XavierInitializer())
            chosen(var, startup_block)
        return param

    def create_variable(self, dtype: int = FLOAT32, suffix: str = "tmp", **kwargs: Any) -> Variable:
        return self.block.create_var(
            self.main.unique_name(f"{self.name}.{suffix}"), dtype=dtype, **kwargs
        )

    def append_op(self, *args: Any, **kwargs: Any):  # noqa: ANN201 - fleet.framework.Operator
        return self.block.append_op(*args, **kwargs)

    def append_activation(self, var: Variable, act: str | None) -> Variable:
        if act is None:
            return var
        out = self.create_variable(var.dtype, suffix=act)
        self.append_op(act, inputs={"X": var}, outputs={"Out": out})
        return out

    def unary(
        self, op_type: str, x: Variable, attrs: dict | None = None, out_dtype: int | None = None
    ) -> Variable:
        out = self.create_variable(x.dtype if out_dtype is None else out_dtype)
        self.append_op(op_type, inputs={"X": x}, outputs={"Out": out}, attrs=attrs or {})
        return out
