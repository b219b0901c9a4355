"""Linear, Embedding and Dropout layers of paddle.nn (static mode)."""

from __future__ import annotations

from typing import Any

from fleet.framework import Variable
from fleet.nn import functional as F
from fleet.nn.layer import Layer


class Linear(Layer):
    """y = x @ weight + bias, weight [in_features, out_features]."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        weight_attr: Any = None,
        bias_attr: Any = None,
        name: str | None = None,
    ) -> None:
        super().__init__(name or "linear")
        self.weight = self.create_parameter([in_features, out_features], attr=weight_attr)
        self.bias = (
            None
            if bias_attr is False
            else self.create_parameter([out_features], attr=bias_attr, is_bias=True)
        )

    def forward(self, x: Variable) -> Variable:
        return F.linear(x, self.weight, self.bias)


class Embedding(Layer):
    """A [num_embeddings, embedding_dim] table; sparse=True gives a row-wise (SelectedRows)
    gradient, which is what makes the table a sparse table on parameter servers."""

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        sparse: bool = False,
        weight_attr: Any = None,
        name: str | None = None,
    ) -> None:
        super().__init__(name or "embedding")
        self._padding_idx = padding_idx
        self._sparse = sparse
        self.weight = self.create_parameter([num_embeddings, embedding_dim], attr=weight_attr)

    def forward(self, x: Variable) -> Variable:
        return F.embedding(x, self.weight, self._padding_idx, self._sparse)


class Dropout(Layer):
    def __init__(self, p: float = 0.5, mode: str = "upscale_in_train", name: str | None = None):
        super().__init__(name or "dropout")
        self._p, self._mode = p, mode

    def forward(self, x: Variable) -> Variable:
        return F.dropout(x, self._p, training=self.training, mode=self._mode)
