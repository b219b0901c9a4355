"""Parameter initialisers: each appends one op to the startup program that fills a parameter."""

from __future__ import annotations

import math
from typing import Any

from fleet.errors import InvalidArgument
from fleet.framework import Block, Variable


class Initializer:
    def __call__(self, var: Variable, block: Block) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement __call__")

    @staticmethod
    def _seed(block: Block, seed: int) -> int:
        # A program-level random_seed makes every initialiser of the program deterministic.
        if seed:
            return seed
        base = block.program.random_seed
        return base + len(block.ops) + 1 if base else 0


class ConstantInitializer(Initializer):
    def __init__(self, value: float = 0.0) -> None:
        self.value = float(value)

    def __call__(self, var: Variable, block: Block) -> None:
        block.append_op(
            "fill_constant",
            outputs={"Out": var},
            attrs={"shape": list(var.shape), "dtype": var.dtype, "value": self.value},
        )


class UniformInitializer(Initializer):
    def __init__(self, low: float = -1.0, high: float = 1.0, seed: int = 0) -> None:
        self.low, self.high, self.seed = float(low), float(high), seed

    def __call__(self, var: Variable, block: Block) -> None:
        block.append_op(
            "uniform_random",
            outputs={"Out": var},
            attrs={
                "shape": list(var.shape),
                "dtype": var.dtype,
                "min": self.low,
                "max": self.high,
                "seed": self._seed(block, self.seed),
            },
        )


class NormalInitializer(Initializer):
    def __init__(self, loc: float = 0.0, scale: float = 1.0, seed: int = 0) -> None:
        self.loc, self.scale, self.seed = float(loc), float(scale), seed

    def __call__(self, var: Variable, block: Block) -> None:
        block.append_op(
            "gaussian_random",
            outputs={"Out": var},
            attrs={
                "shape": list(var.shape),
                "dtype": var.dtype,
                "mean": self.loc,
                "std": self.scale,
                "seed": self._seed(block, self.seed),
            },
        )


class TruncatedNormalInitializer(Initializer):
    """Normal values with those beyond two standard deviations of `loc` drawn again."""

    def __init__(self, loc: float = 0.0, scale: float = 1.0, seed: int = 0) -> None:
        self.loc, self.scale, self.seed = float(loc), float(scale), seed

    def __call__(self, var: Variable, block: Block) -> None:
        block.append_op(
            "truncated_gaussian_random",
            outputs={"Out": var},
            attrs={
                "shape": list(var.shape),
                "dtype": var.dtype,
                "mean": self.loc,
                "std": self.scale,
                "seed": self._seed(block, self.seed),
            },
        )


def compute_fans(shape: tuple[int, ...]) -> tuple[int, int]:
    """(fan_in, fan_out) by Paddle's rule: a scalar 1 and 1; a vector its length twice; a
    matrix [in, out]; a convolution filter [out, in, k...] in * prod(k) and out * prod(k)."""
    if not shape:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


class XavierInitializer(Initializer):
    """Glorot & Bengio (2010): uniform in +-sqrt(6 / (fan_in + fan_out)), or normal with
    std sqrt(2 / (fan_in + fan_out)); fans from the shape unless given."""

    def __init__(
        self,
        uniform: bool = True,
        fan_in: int | None = None,
        fan_out: int | None = None,
        seed: int = 0,
    ) -> None:
        self.uniform, self.fan_in, self.fan_out, self.seed = uniform, fan_in, fan_out, seed

    def __call__(self, var: Variable, block: Block) -> None:
        shape_in, shape_out = compute_fans(var.shape)
        fan_in = self.fan_in or shape_in
        fan_out = self.fan_out or shape_out
        if self.uniform:
            limit = math.sqrt(6.0 / (fan_in + fan_out))
            UniformInitializer(-limit, limit, self.seed)(var, block)
        else:
            NormalInitializer(0.0, math.sqrt(2.0 / (fan_in + fan_out)), self.seed)(var, block)


class MSRAInitializer(Initializer):
    """He et al. (2015), "Delving deep into rectifiers": uniform in +-sqrt(6 / fan_in), or normal
    with std sqrt(2 / fan_in); fan_in from the shape unless given."""

    def __init__(self, uniform: bool = True, fan_in: int | None = None, seed: int = 0) -> None:
        self.uniform, self.fan_in, self.seed = uniform, fan_in, seed

    def __call__(self, var: Variable, block: Block) -> None:
        fan_in = self.fan_in or compute_fans(var.shape)[0]
        if self.uniform:
            limit = math.sqrt(6.0 / fan_in)
            UniformInitializer(-limit, limit, self.seed)(var, block)
        else:
            NormalInitializer(0.0, math.sqrt(2.0 / fan_in), self.seed)(var, block)


Constant = ConstantInitializer
Uniform = UniformInitializer
Normal = NormalInitializer
Xavier = XavierInitializer
TruncatedNormal = TruncatedNormalInitializer
MSRA = MSRAInitializer


def resolve(initializer: Any, default: Initializer) -> Initializer:
    if initializer is None:
        return default
    if not isinstance(initializer, Initializer):
        raise InvalidArgument(
            f"initializer must be a fleet.initializer.Initializer, got {type(initializer).__name__}"
        )
    return initializer
