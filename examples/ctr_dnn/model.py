"""PaddleRec-style CTR-DNN on Fleet: 26 sparse slots sharing one embedding table, 13 dense
features, fc 400-400-400 with ReLU, a 2-way softmax and cross entropy.

Two equivalent input layouts:
- "slots" (default): one lod_level-1 int64 input per slot, embedding + sequence_pool(sum) per
  slot, as PaddleRec writes it; a slot may hold several ids per sample.
- "fused": one [N, 26] int64 input looked up at once and reshaped to [N, 26 * dim]. With
  exactly one id per slot (Criteo) it computes the same function with fewer ops; the benchmark
  uses it for both Fleet and the Paddle peer.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

import fleet
from fleet import layers

NUM_DENSE, NUM_SPARSE = 13, 26


@dataclasses.dataclass
class ModelConfig:
    sparse_dim: int = 1_000_001
    embedding_dim: int = 10
    hidden: tuple[int, ...] = (400, 400, 400)
    optimizer: str = "adam"  # or "adagrad"
    learning_rate: float = 1e-3
    layout: str = "slots"  # or "fused"
    seed: int = 0


@dataclasses.dataclass
class CtrDnn:
    config: ModelConfig
    main: fleet.Program
    startup: fleet.Program
    test: fleet.Program
    loss: fleet.Variable
    predict: fleet.Variable
    auc: fleet.Variable

    def feed(self, dense: np.ndarray, sparse: np.ndarray, label: np.ndarray) -> dict[str, Any]:
        """The feed dict for a batch of reader arrays (dense [N,13], sparse [N,26], label [N,1])."""
        feed: dict[str, Any] = {"dense_input": dense, "label": label}
        if self.config.layout == "fused":
            feed["sparse_input"] = sparse
        else:
            # One id per slot and sample: the executor gives each row its own sequence.
            for slot in range(NUM_SPARSE):
                feed[f"C{slot + 1}"] = sparse[:, slot : slot + 1]
        return feed


def _fc(x: fleet.Variable, width: int, act: str | None) -> fleet.Variable:
    fan_in = x.shape[-1]
    init = fleet.initializer.Normal(0.0, 1.0 / math.sqrt(fan_in))
    return layers.fc(x, width, act=act, param_attr=fleet.ParamAttr(initializer=init))


def _embedded_inputs(cfg: ModelConfig) -> list[fleet.Variable]:
    # Xavier (about +-0.0024 for 1M x 10), as the Paddle peer: PaddleRec's Uniform(-1, 1) lets the
    # network memorise rows from their random start and costs 0.015-0.025 AUC on 200k rows.
    table = fleet.ParamAttr(name="SparseFeatFactors")
    size = [cfg.sparse_dim, cfg.embedding_dim]
    if cfg.layout == "fused":
        ids = layers.data("sparse_input", [NUM_SPARSE], dtype="int64")
        emb = layers.embedding(ids, size, is_sparse=True, param_attr=table)
        return [layers.reshape(emb, [-1, NUM_SPARSE * cfg.embedding_dim])]
    pooled = []
    for slot in range(NUM_SPARSE):
        ids = layers.data(f"C{slot + 1}", [1], dtype="int64", lod_level=1)
        emb = layers.embedding(ids, size, is_sparse=True, param_attr=table)
        pooled.append(layers.sequence_pool(emb, "sum"))
    return pooled


def build(cfg: ModelConfig, wrap_optimizer: Any = None) -> CtrDnn:
    """The programs of CTR-DNN. `wrap_optimizer(opt)` (e.g. fleet.distributed_optimizer with a
    strategy) wraps the optimizer before minimize; the test program is then cloned from the
    rewritten main program, so that it reads the same (distributed) tables."""
    if cfg.layout not in ("slots", "fused"):
        raise ValueError(f"layout must be 'slots' or 'fused', got {cfg.layout!r}")
    main, startup = fleet.Program(), fleet.Program()
    main.random_seed = startup.random_seed = cfg.seed or 1
    with fleet.program_guard(main, startup):
        dense = layers.data("dense_input", [NUM_DENSE])
        label = layers.data("label", [1], dtype="int64")
        x = layers.concat(_embedded_inputs(cfg) + [dense], axis=1)
        for width in cfg.hidden:
            x = _fc(x, width, "relu")
        logits = _fc(x, 2, None)
        predict = layers.softmax(logits)
        loss = layers.mean(layers.softmax_with_cross_entropy(logits, label))
        auc, _, _ = layers.auc(predict, label)
        test = main.clone(for_test=True) if wrap_optimizer is None else None
        if cfg.optimizer == "adam":
            # Lazy Adam updates only the embedding rows a batch touches (as PaddleRec does).
            opt = fleet.optimizer.Adam(cfg.learning_rate, lazy_mode=True)
        elif cfg.optimizer == "adagrad":
            opt = fleet.optimizer.Adagrad(cfg.learning_rate)
        else:
            raise ValueError(f"optimizer must be 'adam' or 'adagrad', got {cfg.optimizer!r}")
        if wrap_optimizer is not None:
            opt = wrap_optimizer(opt)
        opt.minimize(loss)
        if test is None:
            test = main.clone(for_test=True)
    return CtrDnn(cfg, main, startup, test, loss, predict, auc)
