"""Activation layers of paddle.nn."""

from __future__ import annotations

from fleet.framework import Variable
from fleet.nn import functional as F
from fleet.nn.layer import Layer


class ReLU(Layer):
    def forward(self, x: Variable) -> Variable:
        return F.relu(x)


class Sigmoid(Layer):
    def forward(self, x: Variable) -> Variable:
        return F.sigmoid(x)


class Tanh(Layer):
    def forward(self, x: Variable) -> Variable:
        return F.tanh(x)


class Softmax(Layer):
    def __init__(self, axis: int = -1, name: str | None = None) -> None:
        super().__init__(name or "softmax")
        self._axis = axis

    def forward(self, x: Variable) -> Variable:
        return F.softmax(x, self._axis)
