"""paddle.nn.initializer: Paddle 2.x names and keywords over fleet.initializer."""

from __future__ import annotations

from fleet import initializer as _init


class Constant(_init.ConstantInitializer):
    def __init__(self, value: float = 0.0) -> None:
        super().__init__(value)


class Uniform(_init.UniformInitializer):
    def __init__(self, low: float = -1.0, high: float = 1.0, name: str | None = None) -> None:
        super().__init__(low, high)


class Normal(_init.NormalInitializer):
    def __init__(self, mean: float = 0.0, std: float = 1.0, name: str | None = None) -> None:
        super().__init__(mean, std)


class XavierUniform(_init.XavierInitializer):
    def __init__(self, fan_in: float | None = None, fan_out: float | None = None) -> None:
        super().__init__(uniform=True, fan_in=fan_in, fan_out=fan_out)


class XavierNormal(_init.XavierInitializer):
    def __init__(self, fan_in: float | None = None, fan_out: float | None = None) -> None:
        super().__init__(uniform=False, fan_in=fan_in, fan_out=fan_out)


__all__ = ["Constant", "Normal", "Uniform", "XavierNormal", "XavierUniform"]
