"""paddle.nn.Layer in static mode: a layer creates its parameters in the current default main
and startup programs when it is constructed, and appends ops to the main program each time it is
called, as Paddle 2.x does under `paddle.enable_static()`."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Iterable, Iterator, Sequence

from fleet import initializer as init
from fleet._dtypes import to_dtype
from fleet.errors import InvalidArgument
from fleet.framework import Parameter
from fleet.layers.helper import LayerHelper
from fleet.param_attr import ParamAttr


class Layer:
    """Base of every nn layer: holds parameters and sublayers, `__call__` runs `forward`."""

    def __init__(self, name_scope: str | None = None, dtype: Any = "float32") -> None:
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_sub_layers", OrderedDict())
        self.training = True
        self._dtype = dtype
        self._helper = LayerHelper(name_scope or type(self).__name__.lower())

    def __setattr__(self, name: str, value: Any) -> None:
        if "_parameters" not in self.__dict__:
            raise InvalidArgument(
                f"{type(self).__name__}.{name}: call super().__init__() in __init__ before "
                "setting attributes of a Layer"
            )
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Layer):
            self._sub_layers[name] = value
        object.__setattr__(self, name, value)

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *inputs: Any, **kwargs: Any) -> Any:
        return self.forward(*inputs, **kwargs)

    def create_parameter(
        self,
        shape: Sequence[int],
        attr: Any = None,
        dtype: Any = None,
        is_bias: bool = False,
        default_initializer: init.Initializer | None = None,
    ) -> Parameter:
        """A parameter in the current programs; biases start at 0, weights Xavier, unless the
        attribute or `default_initializer` says otherwise."""
        if default_initializer is None:
            default_initializer = (
                init.ConstantInitializer(0.0) if is_bias else init.XavierInitializer()
            )
        return self._helper.create_parameter(
            ParamAttr.of(attr),
            shape,
            to_dtype(dtype or self._dtype),
            default_initializer=default_initializer,
            suffix="b" if is_bias else "w",
        )

    def add_sublayer(self, name: str, sublayer: "Layer") -> "Layer":
        if not isinstance(sublayer, Layer):
            raise InvalidArgument(
                f"add_sublayer({name!r}): expected a Layer, got {type(sublayer).__name__}"
            )
        self._sub_layers[name] = sublayer
        object.__setattr__(self, name, sublayer)
        return sublayer

    def add_parameter(self, name: str, parameter: Parameter) -> Parameter:
        self._parameters[name] = parameter
        object.__setattr__(self, name, parameter)
        return parameter

    def named_sublayers(self, prefix: str = "") -> Iterator[tuple[str, "Layer"]]:
        for name, layer in self._sub_layers.items():
            full = f"{prefix}.{name}" if prefix else name
            yield full, layer
            yield from layer.named_sublayers(full)

    def sublayers(self) -> list["Layer"]:
        return [layer for _, layer in self.named_sublayers()]

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, Parameter]]:
        for name, param in self._parameters.items():
            yield (f"{prefix}.{name}" if prefix else name), param
        for name, layer in self._sub_layers.items():
            yield from layer.named_parameters(f"{prefix}.{name}" if prefix else name)

    def parameters(self) -> list[Parameter]:
        return [p for _, p in self.named_parameters()]

    def train(self) -> "Layer":
        for layer in [self, *self.sublayers()]:
            layer.training = True
        return self

    def eval(self) -> "Layer":
        for layer in [self, *self.sublayers()]:
            layer.training = False
        return self


class LayerList(Layer):
    """A list of sublayers, registered so that their parameters belong to the parent."""

    def __init__(self, sublayers: Iterable[Layer] | None = None) -> None:
        super().__init__()
        for layer in sublayers or ():
            self.append(layer)

    def append(self, sublayer: Layer) -> "LayerList":
        self.add_sublayer(str(len(self._sub_layers)), sublayer)
        return self

    def extend(self, sublayers: Iterable[Layer]) -> "LayerList":
        for layer in sublayers:
            self.append(layer)
        return self

    def __getitem__(self, index: int) -> Layer:
        return list(self._sub_layers.values())[index]

    def __len__(self) -> int:
        return len(self._sub_layers)

    def __iter__(self) -> Iterator[Layer]:
        return iter(list(self._sub_layers.values()))


class Sequential(Layer):
    """Runs its sublayers one after the other."""

    def __init__(self, *layers: Layer) -> None:
        super().__init__()
        for i, layer in enumerate(layers):
            self.add_sublayer(str(i), layer)

    def forward(self, x: Any) -> Any:
        for layer in self._sub_layers.values():
            x = layer(x)
        return x
