"""fluid-style layer functions: each appends ops (and parameters) to the default programs."""

from fleet.layers.io import data, static_data
from fleet.layers.loss import (
    cross_entropy,
    log_loss,
    sigmoid_cross_entropy_with_logits,
    softmax_with_cross_entropy,
)
from fleet.layers.math import (
    elementwise_add,
    elementwise_div,
    elementwise_mul,
    elementwise_sub,
    matmul,
    mean,
    mul,
    reduce_mean,
    reduce_sum,
    scale,
)
from fleet.layers.metric import accuracy, auc
from fleet.layers.nn import dropout, embedding, fc, relu, sequence_pool, sigmoid, softmax, tanh
from fleet.layers.tensor import (
    cast,
    concat,
    fill_constant,
    gaussian_random,
    reshape,
    split,
    sums,
    uniform_random,
    zeros_like,
)

__all__ = [
    "accuracy",
    "auc",
    "cast",
    "concat",
    "cross_entropy",
    "data",
    "dropout",
    "elementwise_add",
    "elementwise_div",
    "elementwise_mul",
    "elementwise_sub",
    "embedding",
    "fc",
    "fill_constant",
    "gaussian_random",
    "log_loss",
    "matmul",
    "mean",
    "mul",
    "reduce_mean",
    "reduce_sum",
    "relu",
    "reshape",
    "scale",
    "sequence_pool",
    "sigmoid",
    "sigmoid_cross_entropy_with_logits",
    "softmax",
    "softmax_with_cross_entropy",
    "split",
    "static_data",
    "sums",
    "tanh",
    "uniform_random",
    "zeros_like",
]
