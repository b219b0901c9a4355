"""Wide & Deep (Cheng et al., 2016, "Wide & Deep Learning for Recommender Systems") on
Criteo-format rows, as a Fleet program.

* wide: a linear model, one weight per sparse id and per hashed cross of two slots (a table of
  dim 1, ``is_sparse``), plus a linear term of the 13 dense features;
* deep: CTR-DNN's network (embeddings of the 26 slots, concatenated with the dense features,
  fc 400-400-400 ReLU) ending in one unit;
* the two logits are summed and trained jointly with the logistic loss.

The paper trains the wide part with FTRL and the deep part with AdaGrad. Fleet has no FTRL: the
wide weights get their own optimizer (``--wide_optimizer``, Adagrad by default, with its own
learning rate), the rest of the model ``--optimizer``. In a parameter-server job the wide weights
are a sparse table with its own rule on the servers (``DistributedStrategy.table_optimizers``);
the wide part's linear term of the dense features stays with the dense parameters, which share
one table and one rule, so it follows ``--optimizer`` in every mode.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

import fleet
from fleet import layers

NUM_DENSE, NUM_SPARSE = 13, 26
WIDE_WEIGHTS = "wide_weights"
_MASK64 = np.uint64((1 << 64) - 1)


@dataclasses.dataclass
class ModelConfig:
    sparse_dim: int = 1_000_001
    embedding_dim: int = 10
    hidden: tuple[int, ...] = (400, 400, 400)
    crosses: tuple[tuple[int, int], ...] = ()
    optimizer: str = "adagrad"  # or "adam"
    learning_rate: float = 0.02
    wide_optimizer: str = "adagrad"  # the wide weights' (WIDE_WEIGHTS), or "same"
    wide_learning_rate: float = 0.02
    seed: int = 1


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, vectorised (uint64 arithmetic wraps)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def wide_ids(sparse: np.ndarray, crosses, sparse_dim: int) -> np.ndarray:  # noqa: ANN001
    """[N, 26 + len(crosses)] ids of the wide table: the 26 slot ids, then one hashed id per
    cross (slot a, slot b) in [sparse_dim, 2 sparse_dim), apart from the single ids."""
    columns = [sparse]
    for k, (a, b) in enumerate(crosses):
        key = (
            sparse[:, a].astype(np.uint64) * np.uint64(sparse_dim) + sparse[:, b].astype(np.uint64)
        ) ^ (np.uint64(k + 1) << np.uint64(56))
        columns.append((sparse_dim + _mix64(key) % np.uint64(sparse_dim)).astype(np.int64)[:, None])
    return np.concatenate(columns, axis=1)


def smallest_slots_crosses(sparse: np.ndarray, slots: int = 5) -> tuple[tuple[int, int], ...]:
    """Every pair of the ``slots`` slots with the fewest distinct ids in ``sparse`` (the training
    rows): a generic rule for "a few crosses" of low-cardinality fields."""
    distinct = [len(np.unique(sparse[:, s])) for s in range(sparse.shape[1])]
    small = sorted(sorted(range(len(distinct)), key=lambda s: distinct[s])[:slots])
    return tuple((a, b) for i, a in enumerate(small) for b in small[i + 1 :])


@dataclasses.dataclass
class WideDeep:
    config: ModelConfig
    main: fleet.Program
    startup: fleet.Program
    test: fleet.Program
    loss: fleet.Variable
    predict: fleet.Variable  # [N, 2]: P(no click), P(click)
    auc: fleet.Variable

    def feed(self, dense: np.ndarray, sparse: np.ndarray, label: np.ndarray) -> dict:
        cfg = self.config
        return {
            "dense_input": dense,
            "sparse_input": sparse,
            "wide_input": wide_ids(sparse, cfg.crosses, cfg.sparse_dim),
            "label": label,
        }


def _fc(x: fleet.Variable, width: int, act: str | None) -> fleet.Variable:
    init = fleet.initializer.Normal(0.0, 1.0 / math.sqrt(x.shape[-1]))
    return layers.fc(x, width, act=act, param_attr=fleet.ParamAttr(initializer=init))


def _optimizer(name: str, learning_rate: float) -> fleet.optimizer.Optimizer:
    if name == "adagrad":
        return fleet.optimizer.Adagrad(learning_rate)
    if name == "adam":
        return fleet.optimizer.Adam(learning_rate, lazy_mode=True)
    raise ValueError(f"optimizer must be adagrad or adam, got {name!r}")


def build(cfg: ModelConfig, wrap_optimizer=None) -> WideDeep:  # noqa: ANN001
    """The programs; ``wrap_optimizer(opt, table_optimizers)`` (fleet.distributed_optimizer
    with the strategy's table_optimizers set) wraps the optimizer and the test program is then
    cloned from the rewritten main program."""
    main, startup = fleet.Program(), fleet.Program()
    main.random_seed = startup.random_seed = cfg.seed
    width = NUM_SPARSE + len(cfg.crosses)
    with fleet.program_guard(main, startup):
        dense = layers.data("dense_input", [NUM_DENSE])
        sparse = layers.data("sparse_input", [NUM_SPARSE], dtype="int64")
        wide = layers.data("wide_input", [width], dtype="int64")
        label = layers.data("label", [1], dtype="int64")
        weights = layers.embedding(
            wide,
            [2 * cfg.sparse_dim, 1],
            is_sparse=True,
            param_attr=fleet.ParamAttr(
                name=WIDE_WEIGHTS, initializer=fleet.initializer.Constant(0.0)
            ),
        )
        wide_logit = layers.elementwise_add(
            layers.reduce_sum(layers.reshape(weights, [-1, width]), dim=1, keep_dim=True),
            layers.fc(dense, 1),
        )
        emb = layers.embedding(
            sparse,
            [cfg.sparse_dim, cfg.embedding_dim],
            is_sparse=True,
            param_attr=fleet.ParamAttr(name="deep_embedding"),
        )
        x = layers.concat([layers.reshape(emb, [-1, NUM_SPARSE * cfg.embedding_dim]), dense], 1)
        for hidden in cfg.hidden:
            x = _fc(x, hidden, "relu")
        logit = layers.elementwise_add(wide_logit, _fc(x, 1, None))
        loss = layers.mean(
            layers.sigmoid_cross_entropy_with_logits(logit, layers.cast(label, "float32"))
        )
        click = layers.sigmoid(logit)
        predict = layers.concat([layers.scale(click, scale=-1.0, bias=1.0), click], axis=1)
        auc, _, _ = layers.auc(predict, label)
        test = main.clone(for_test=True) if wrap_optimizer is None else None
        opt = _optimizer(cfg.optimizer, cfg.learning_rate)
        own = {}
        if cfg.wide_optimizer != "same":
            own[WIDE_WEIGHTS] = _optimizer(cfg.wide_optimizer, cfg.wide_learning_rate)
        if wrap_optimizer is not None:
            wrap_optimizer(opt, own).minimize(loss)
        else:
            fleet.optimizer.apply_per_parameter(opt, opt.backward(loss), own)
        if test is None:
            test = main.clone(for_test=True)
    return WideDeep(cfg, main, startup, test, loss, predict, auc)
