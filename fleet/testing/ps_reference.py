"""NumPy references of the parameter server's update rules (csrc/ps/update_rule.cc), written
from the formulas of the fluid ``sgd``, ``adagrad`` and ``adam`` ops, for tests that compare
the server's rows with an independent computation."""

from __future__ import annotations

from typing import Any, Mapping, Tuple, Union

import numpy as np
from google.protobuf import json_format

from fleet.proto import ps_pb2

OptimizerLike = Union[ps_pb2.OptimizerConfig, Mapping[str, Any]]


class ReferenceRule:
    """One update rule in float32 NumPy: ``state = init_state(dim)``, then
    ``w, state = update(w, state, g)`` per push."""

    def __init__(self, optimizer: OptimizerLike) -> None:
        if not isinstance(optimizer, ps_pb2.OptimizerConfig):
            optimizer = json_format.ParseDict(dict(optimizer), ps_pb2.OptimizerConfig())
        self.kind = optimizer.WhichOneof("rule")
        self.lr = np.float32(optimizer.learning_rate)
        if self.kind == "adagrad":
            c = optimizer.adagrad
            self.eps = np.float32(c.epsilon if c.HasField("epsilon") else 1e-6)
            self.init = np.float32(
                c.initial_accumulator if c.HasField("initial_accumulator") else 0.0
            )
        elif self.kind == "adam":
            c = optimizer.adam
            self.beta1 = np.float32(c.beta1 if c.HasField("beta1") else 0.9)
            self.beta2 = np.float32(c.beta2 if c.HasField("beta2") else 0.999)
            self.eps = np.float32(c.epsilon if c.HasField("epsilon") else 1e-8)

    def state_dim(self, dim: int) -> int:
        return {"sgd": 0, "adagrad": dim, "adam": 2 * dim + 2}[self.kind]

    def init_state(self, dim: int) -> np.ndarray:
        if self.kind == "adagrad":
            return np.full(dim, self.init, np.float32)
        if self.kind == "adam":
            state = np.zeros(2 * dim + 2, np.float32)
            state[2 * dim :] = [self.beta1, self.beta2]
            return state
        return np.zeros(0, np.float32)

    def update(
        self, w: np.ndarray, state: np.ndarray, g: np.ndarray
    ) -> Tuple[np.ndarray, np.ndarray]:
        w = w.astype(np.float32).copy()
        state = state.astype(np.float32).copy()
        g = g.astype(np.float32)
        if self.kind == "sgd":
            return w - self.lr * g, state
        if self.kind == "adagrad":
            state += g * g
            return w - self.lr * g / (np.sqrt(state) + self.eps), state
        dim = w.size
        m, v = state[:dim], state[dim : 2 * dim]
        beta1_pow, beta2_pow = state[2 * dim], state[2 * dim + 1]
        lr_t = self.lr * np.sqrt(1 - beta2_pow) / (1 - beta1_pow)
        m[:] = self.beta1 * m + (1 - self.beta1) * g
        v[:] = self.beta2 * v + (1 - self.beta2) * g * g
        w = w - lr_t * m / (np.sqrt(v) + self.eps * np.sqrt(1 - beta2_pow))
        state[2 * dim] = beta1_pow * self.beta1
        state[2 * dim + 1] = beta2_pow * self.beta2
        return w, state


OPTIMIZERS = {
    "sgd": {"learning_rate": 0.1, "sgd": {}},
    "adagrad": {"learning_rate": 0.1, "adagrad": {"epsilon": 1e-6}},
    "adam": {"learning_rate": 0.01, "adam": {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8}},
}
"""One config of each rule, shared by the tests."""


def sgd_sparse_table(dim: int = 4, learning_rate: float = 0.1) -> dict:
    """The tests' plain sparse table: id 1, "emb", SGD, rows created at zero (seed 1)."""
    return {
        "table_id": 1,
        "name": "emb",
        "type": "SPARSE",
        "dim": dim,
        "optimizer": {**OPTIMIZERS["sgd"], "learning_rate": learning_rate},
        "initializer": {"seed": 1, "zero": {}},
    }


__all__ = ["ReferenceRule", "OPTIMIZERS", "sgd_sparse_table"]
