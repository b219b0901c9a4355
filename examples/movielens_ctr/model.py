"""DeepFM over the MovieLens slots: one shared id space (reader.OFFSETS), a first-order weight
per id, a factorisation-machine term over the slots' embeddings (the pairwise user x item, user
x genre, ... interactions a logistic regression cannot express) and a DNN over the same
embeddings. The three add up to the logit of a 2-way softmax."""

from __future__ import annotations

import dataclasses
import math

import reader

import fleet
from fleet import layers


@dataclasses.dataclass
class ModelConfig:
    embedding_dim: int = 16
    hidden: tuple[int, ...] = (64, 32)
    learning_rate: float = 1e-3
    seed: int = 1


@dataclasses.dataclass
class DeepFm:
    main: fleet.Program
    startup: fleet.Program
    test: fleet.Program
    loss: fleet.Variable
    predict: fleet.Variable
    auc: fleet.Variable


def _pooled(ids: fleet.Variable, name: str, dim: int, pool: str) -> fleet.Variable:
    table = fleet.ParamAttr(name=name, initializer=fleet.initializer.Normal(0.0, 0.01))
    emb = layers.embedding(ids, [reader.VOCAB_SIZE, dim], is_sparse=True, param_attr=table)
    return layers.sequence_pool(emb, pool)


def build(cfg: ModelConfig) -> DeepFm:
    main, startup = fleet.Program(), fleet.Program()
    main.random_seed = startup.random_seed = cfg.seed
    with fleet.program_guard(main, startup):
        slots = [layers.data(name, [1], dtype="int64", lod_level=1) for name in reader.ID_SLOTS]
        label = layers.data("label", [1], dtype="int64")
        # Genres hold several ids: their mean keeps the slot on the scale of the others.
        pools = ["average" if name == "genres" else "sum" for name in reader.ID_SLOTS]
        wide = layers.sums([_pooled(s, "first_order", 2, p) for s, p in zip(slots, pools)])
        embs = [_pooled(s, "factors", cfg.embedding_dim, p) for s, p in zip(slots, pools)]
        # FM: sum over slot pairs of <e_a, e_b> = ((sum e)^2 - sum e^2) / 2, summed over dims.
        total = layers.sums(embs)
        squares = layers.sums([layers.elementwise_mul(e, e) for e in embs])
        pairwise = layers.elementwise_sub(layers.elementwise_mul(total, total), squares)
        fm = layers.scale(layers.reduce_sum(pairwise, dim=1, keep_dim=True), 0.5)
        fm_logits = layers.concat([layers.zeros_like(fm), fm], axis=1)
        x = layers.concat(embs, axis=1)
        for width in cfg.hidden:
            x = layers.fc(
                x,
                width,
                act="relu",
                param_attr=fleet.ParamAttr(
                    initializer=fleet.initializer.Normal(0.0, 1.0 / math.sqrt(x.shape[-1]))
                ),
            )
        dnn_logits = layers.fc(x, 2)
        logits = layers.sums([wide, fm_logits, dnn_logits])
        predict = layers.softmax(logits)
        loss = layers.mean(layers.softmax_with_cross_entropy(logits, label))
        auc, _, _ = layers.auc(predict, label)
        test = main.clone(for_test=True)
        fleet.optimizer.Adam(cfg.learning_rate, lazy_mode=True).minimize(loss)
    return DeepFm(main, startup, test, loss, predict, auc)
