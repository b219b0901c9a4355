"""Skip-gram with negative sampling (Mikolov et al., 2013) as a Fleet program.

Inputs per sample: ``centre`` [1] and ``targets`` [1 + K] (the context word, then K negatives).
The input embedding of the centre word is scored against the output embeddings of the targets
by a dot product; the loss is the logistic loss of the context (label 1) plus that of each
negative (label 0), summed per sample and averaged over the batch. Both tables are ``is_sparse``:
parameter-server jobs keep them on the servers keyed by word id. Initialised as word2vec.c does:
input rows uniform in +-0.5/dim, output rows zero.
"""

from __future__ import annotations

import dataclasses

import fleet
from fleet import layers

INPUT_TABLE, OUTPUT_TABLE = "w2v_input", "w2v_output"


@dataclasses.dataclass
class ModelConfig:
    vocab_size: int
    dim: int = 64
    negatives: int = 5
    optimizer: str = "adagrad"  # or "sgd", "adam"
    learning_rate: float = 0.2
    seed: int = 1


@dataclasses.dataclass
class SkipGram:
    config: ModelConfig
    main: fleet.Program
    startup: fleet.Program
    test: fleet.Program
    loss: fleet.Variable
    logits: fleet.Variable  # [N, 1 + K]: the context's score, then the negatives'
    centre_vector: fleet.Variable  # [N, 1, dim]: input embeddings of the centre words


def _optimizer(cfg: ModelConfig) -> fleet.optimizer.Optimizer:
    if cfg.optimizer == "sgd":
        return fleet.optimizer.SGD(cfg.learning_rate)
    if cfg.optimizer == "adagrad":
        return fleet.optimizer.Adagrad(cfg.learning_rate)
    if cfg.optimizer == "adam":
        return fleet.optimizer.Adam(cfg.learning_rate, lazy_mode=True)
    raise ValueError(f"optimizer must be sgd, adagrad or adam, got {cfg.optimizer!r}")


def build(cfg: ModelConfig, wrap_optimizer=None) -> SkipGram:  # noqa: ANN001
    """The programs; ``wrap_optimizer(opt)`` (fleet.distributed_optimizer with a strategy) wraps
    the optimizer, and the test program is then cloned from the rewritten main program."""
    main, startup = fleet.Program(), fleet.Program()
    main.random_seed = startup.random_seed = cfg.seed
    k = cfg.negatives
    with fleet.program_guard(main, startup):
        centre = layers.data("centre", [1], dtype="int64")
        targets = layers.data("targets", [1 + k], dtype="int64")
        bound = 0.5 / cfg.dim
        centre_vector = layers.embedding(
            centre,
            [cfg.vocab_size, cfg.dim],
            is_sparse=True,
            param_attr=fleet.ParamAttr(
                name=INPUT_TABLE, initializer=fleet.initializer.Uniform(-bound, bound)
            ),
        )
        target_vectors = layers.embedding(
            targets,
            [cfg.vocab_size, cfg.dim],
            is_sparse=True,
            param_attr=fleet.ParamAttr(
                name=OUTPUT_TABLE, initializer=fleet.initializer.Constant(0.0)
            ),
        )
        # A lookup of [N, 1] ids is [N, dim] (Paddle's lookup_table); as [N, 1, dim]:
        # [N, 1+K, dim] x [N, 1, dim]^T -> [N, 1+K, 1]
        centre_vector = layers.reshape(centre_vector, [-1, 1, cfg.dim])
        scores = layers.matmul(target_vectors, centre_vector, transpose_y=True)
        logits = layers.reshape(scores, [-1, 1 + k])
        positive, negative = layers.split(logits, [1, k], dim=1)
        ones = layers.scale(layers.zeros_like(positive), bias=1.0)
        losses = layers.concat(
            [
                layers.sigmoid_cross_entropy_with_logits(positive, ones),
                layers.sigmoid_cross_entropy_with_logits(negative, layers.zeros_like(negative)),
            ],
            axis=1,
        )
        loss = layers.mean(layers.reduce_sum(losses, dim=1))
        test = main.clone(for_test=True) if wrap_optimizer is None else None
        opt = _optimizer(cfg)
        if wrap_optimizer is not None:
            opt = wrap_optimizer(opt)
        opt.minimize(loss)
        if test is None:
            test = main.clone(for_test=True)
    return SkipGram(cfg, main, startup, test, loss, logits, centre_vector)
