"""ROC AUC and a logistic-regression baseline for the CTR-DNN examples, in plain NumPy.

The LR model sees exactly the CTR-DNN's features (one weight per hashed sparse id, the 13
log-transformed dense features, a bias), so the gap between it and the DNN measures what the
network learns beyond additive effects: feature interactions and non-linear dense responses.

CLI: ``python examples/ctr_dnn/baselines.py --train FILE [FILE ...] --test FILE`` prints one
line per epoch and finally ``lr_test_auc=<value>``.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import sys
import time

import numpy as np


def _load_sibling(name: str):
    # The examples folder is not a package; load siblings by path so that this file works both
    # as a script and when imported from elsewhere (tests, the Paddle peer).
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


criteo_reader = _load_sibling("criteo_reader")


def histogram_auc(scores: np.ndarray, labels: np.ndarray, num_thresholds: int = 4095) -> float:
    """The AUC the streaming auc op reports for these predictions seen all at once: probability
    p goes to bin floor(p * num_thresholds) (in float32, as the op computes it), then the
    trapezoids of fleet.metrics.auc_of_histograms."""
    from fleet.metrics import auc_of_histograms

    bins = (np.asarray(scores, np.float32).ravel() * np.float32(num_thresholds)).astype(np.int64)
    y = np.asarray(labels).ravel()
    pos = np.bincount(bins[y == 1], minlength=num_thresholds + 1)
    neg = np.bincount(bins[y == 0], minlength=num_thresholds + 1)
    return auc_of_histograms(pos, neg)


def roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve via the Mann-Whitney U statistic; tied scores get mid-ranks.

    ``labels`` are 0/1 (any shape, flattened); ``scores`` are any real numbers, higher meaning
    more likely positive. Raises ``ValueError`` if the sizes differ or only one class is present.
    """
    y = np.asarray(labels).ravel()
    s = np.asarray(scores, dtype=np.float64).ravel()
    if y.shape != s.shape:
        raise ValueError(f"roc_auc: {y.size} labels but {s.size} scores")
    positive = y == 1
    if not np.all(positive | (y == 0)):
        raise ValueError(f"roc_auc: labels must be 0/1, got {np.unique(y)[:5]}")
    n_pos = int(positive.sum())
    n_neg = y.size - n_pos
    if n_pos == 0 or n_neg == 0:
        raise ValueError(f"roc_auc: need both classes, got {n_pos} positives, {n_neg} negatives")
    order = np.argsort(s, kind="mergesort")
    sorted_s = s[order]
    # Mid-rank of each tie group: (first rank + last rank) / 2, ranks 1-based.
    group_start = np.flatnonzero(np.r_[True, sorted_s[1:] != sorted_s[:-1]])
    group_size = np.diff(np.r_[group_start, s.size])
    mid_rank = group_start + (group_size + 1) / 2.0
    ranks = np.empty(s.size, dtype=np.float64)
    ranks[order] = np.repeat(mid_rank, group_size)
    u = ranks[positive].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u / (n_pos * n_neg))


def log_loss(labels: np.ndarray, probs: np.ndarray) -> float:
    """Mean binary cross-entropy, probabilities clipped to [1e-7, 1 - 1e-7]."""
    y = np.asarray(labels, dtype=np.float64).ravel()
    p = np.clip(np.asarray(probs, dtype=np.float64).ravel(), 1e-7, 1 - 1e-7)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log1p(-p)))


@dataclasses.dataclass
class LRConfig:
    """Hyper-parameters of the Adagrad logistic regression (Duchi et al., JMLR 2011)."""

    epochs: int = 3
    batch_size: int = 256
    learning_rate: float = 0.05
    l2: float = 1e-6  # per-example L2 on the weights a batch touches; tames rare ids
    initial_accumulator: float = 0.1
    seed: int = 0


class LogisticRegression:
    """Linear model: ``bias + sum_slots w[id] + dense @ v``, trained with per-coordinate Adagrad.

    Sparse weights are a flat table over the hashed id space; each step only touches the ids of
    the batch (aggregated with ``np.unique`` + ``np.bincount``), as a parameter server would.
    """

    def __init__(self, sparse_dim: int, num_dense: int, config: LRConfig) -> None:
        self.config = config
        self.sparse_w = np.zeros(sparse_dim, dtype=np.float64)
        self.sparse_acc = np.full(sparse_dim, config.initial_accumulator, dtype=np.float64)
        self.dense_w = np.zeros(num_dense + 1, dtype=np.float64)  # last entry: bias
        self.dense_acc = np.full(num_dense + 1, config.initial_accumulator, dtype=np.float64)

    def predict(self, dense: np.ndarray, sparse: np.ndarray) -> np.ndarray:
        """Click probabilities [N] for dense [N, D] and sparse [N, S] features."""
        return sigmoid(self._logit(dense, sparse))

    def _logit(self, dense: np.ndarray, sparse: np.ndarray) -> np.ndarray:
        return self.sparse_w[sparse].sum(axis=1) + dense @ self.dense_w[:-1] + self.dense_w[-1]

    def train_batch(self, dense: np.ndarray, sparse: np.ndarray, label: np.ndarray) -> None:
        """One Adagrad step on the mean log-loss of the batch."""
        cfg = self.config
        n = label.shape[0]
        err = (sigmoid(self._logit(dense, sparse)) - label.ravel()) / n
        ids, inverse = np.unique(sparse, return_inverse=True)
        grad = np.bincount(inverse.ravel(), weights=np.repeat(err, sparse.shape[1]))
        grad += cfg.l2 * self.sparse_w[ids]
        self.sparse_acc[ids] += grad * grad
        self.sparse_w[ids] -= cfg.learning_rate * grad / np.sqrt(self.sparse_acc[ids])
        dgrad = np.append(dense.T @ err, err.sum())
        self.dense_acc += dgrad * dgrad
        self.dense_w -= cfg.learning_rate * dgrad / np.sqrt(self.dense_acc)


def sigmoid(x: np.ndarray) -> np.ndarray:
    """Logistic function, written with tanh so large |x| cannot overflow."""
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def train_lr(train, test, config: LRConfig, sparse_dim: int, verbose: bool = True) -> float:
    """Trains LR on ``train`` (CriteoArrays) and returns its test AUC after the last epoch."""
    model = LogisticRegression(sparse_dim, train.dense.shape[1], config)
    auc = float("nan")
    for epoch in range(config.epochs):
        start = time.perf_counter()
        batches = criteo_reader.iterate_batches(
            train, config.batch_size, shuffle=True, seed=config.seed + epoch
        )
        for batch in batches:
            model.train_batch(batch.dense, batch.sparse, batch.label)
        probs = model.predict(test.dense, test.sparse)
        auc = roc_auc(test.label, probs)
        if verbose:
            print(
                f"epoch={epoch + 1} test_auc={auc:.5f} "
                f"test_logloss={log_loss(test.label, probs):.5f} "
                f"seconds={time.perf_counter() - start:.1f}",
                flush=True,
            )
    return auc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", nargs="+", required=True, help="Criteo-format training files")
    parser.add_argument("--test", required=True, help="Criteo-format test file")
    parser.add_argument("--sparse_dim", type=int, default=criteo_reader.DEFAULT_SPARSE_DIM)
    defaults = LRConfig()
    parser.add_argument("--epochs", type=int, default=defaults.epochs)
    parser.add_argument("--batch_size", type=int, default=defaults.batch_size)
    parser.add_argument("--learning_rate", type=float, default=defaults.learning_rate)
    parser.add_argument("--l2", type=float, default=defaults.l2)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    args = parser.parse_args(argv)
    config = LRConfig(
        epochs=args.epochs,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        l2=args.l2,
        seed=args.seed,
    )
    train = criteo_reader.read_criteo(args.train, sparse_dim=args.sparse_dim)
    test = criteo_reader.read_criteo(args.test, sparse_dim=args.sparse_dim)
    auc = train_lr(train, test, config, args.sparse_dim)
    print(f"lr_test_auc={auc:.5f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
