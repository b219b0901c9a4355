"""paddle.nn for static programs: `import fleet as paddle` makes a PaddleRec model's
`paddle.nn.Layer`, `paddle.nn.Embedding(sparse=True)`, `paddle.nn.Linear`, activations,
`paddle.nn.initializer` and `paddle.nn.functional` build Fleet programs."""

from fleet.nn import functional, initializer
from fleet.nn.activation import ReLU, Sigmoid, Softmax, Tanh
from fleet.nn.common import Dropout, Embedding, Linear
from fleet.nn.layer import Layer, LayerList, Sequential

__all__ = [
    "Dropout",
    "Embedding",
    "Layer",
    "LayerList",
    "Linear",
    "ReLU",
    "Sequential",
    "Sigmoid",
    "Softmax",
    "Tanh",
    "functional",
    "initializer",
]
