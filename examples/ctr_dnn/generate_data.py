"""Synthetic Criteo-format click data drawn from a planted ("teacher") model.

Why: the real Criteo set cannot be redistributed, and a known teacher gives an oracle AUC, so a
trained CTR-DNN can be judged against the best achievable score rather than only against peers.

Rows follow the Criteo Display Advertising layout (label, I1..I13, C1..C26; TAB-separated;
empty = missing). The teacher's logit is the sum of

* per-id main effects on every categorical slot; ids are drawn with Zipf frequencies and the
  effect of an id shrinks with its expected count, so rare ids carry little signal (as in real
  logs, and so that the score is learnable from a few hundred thousand rows);
* rank-1 pairwise interactions between four pairs of small slots (4 to 105 ids), centred so
  that they have no main effect at all: a logistic regression on one-hot features cannot use them;
* linear plus non-linear (bumps, products, a cosine) terms of the standardised
  ``log(1 + max(x, 0))`` dense fields, the transform the reader applies, so a model sees what the
  teacher saw;
* a bias solved so that the mean click-through rate is ``base_ctr``.

Each component is rescaled to a target standard deviation (in logit units) on a fixed calibration
sample, so the knobs in ``TeacherConfig`` mean what they say. Output is deterministic for a seed
and independent of how the training rows are split into part files.

Calibration of the defaults (200k train / 50k test rows, seeds 0, 1, 2): oracle AUC 0.795, 0.780,
0.786; the Paddle CTR-DNN peer (benchmarks/peers/paddle_ctr_dnn.py, one epoch) 0.021, 0.020, 0.026
below it; the logistic regression of baselines.py 0.035, 0.016, 0.037 below the DNN. A second
epoch costs the DNN 0.004-0.005 and a third 0.02 (it memorises rows through rare ids).

CLI: ``python examples/ctr_dnn/generate_data.py --out DIR --train_rows N --test_rows M --seed S``
writes DIR/train.txt (or DIR/train-00000.txt ... with ``--train_parts K``), DIR/test.txt and
DIR/oracle.json, and prints ``oracle_auc=<value>`` (the teacher's AUC on the test file).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import sys
import time

import numpy as np


def _load_sibling(name: str):
    # The examples folder is not a package; load siblings by path (works as script and import).
    if name in sys.modules:
        return sys.modules[name]
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


baselines = _load_sibling("baselines")
criteo_reader = _load_sibling("criteo_reader")

NUM_DENSE = criteo_reader.NUM_DENSE
NUM_SPARSE = criteo_reader.NUM_SPARSE
# Rows generated per random stream; fixed so that output does not depend on --train_parts.
CHUNK_ROWS = 1 << 16
_SPLIT_IDS = {"train": 1, "test": 2, "calibration": 3}

# Per-slot tables for C1..C26, 13 slots per line.
# fmt: off
# Vocabulary per slot: the Criteo Kaggle cardinalities, capped at 50k so a 1M-id table holds them.
_VOCAB = (1460, 583, 50000, 40000, 305, 24, 12517, 633, 4, 30000, 5683, 50000, 3194,
          27, 14992, 45000, 10, 5652, 2173, 4, 48000, 18, 15, 30000, 105, 20000)
# Probability that a slot is empty; Criteo's C19/C20/C25/C26 and C22 are often missing.
_CAT_MISSING = (0.0, 0.0, 0.03, 0.03, 0.0, 0.12, 0.0, 0.0, 0.0, 0.0, 0.0, 0.03, 0.0,
                0.0, 0.0, 0.03, 0.0, 0.0, 0.3, 0.3, 0.03, 0.6, 0.0, 0.03, 0.3, 0.3)
# fmt: on
# Dense counts: floor(exp(mu + sigma * z)) with z ~ N(0,1) correlated through a row latent;
# mu/sigma/missing rate roughly match the medians and spreads of Criteo's I1..I13.
_DENSE_MU = (0.7, 1.2, 1.8, 1.4, 8.0, 3.7, 1.2, 2.1, 3.7, -0.5, 0.5, -0.5, 1.6)
_DENSE_SIGMA = (1.2, 2.0, 1.5, 1.0, 1.7, 1.6, 1.6, 1.0, 1.4, 0.8, 1.0, 1.2, 1.2)
_DENSE_MISSING = (0.44, 0.0, 0.22, 0.21, 0.05, 0.25, 0.05, 0.0, 0.05, 0.44, 0.05, 0.78, 0.21)
# 0-based slot pairs with planted interactions: (C9, C20), (C17, C23), (C6, C14), (C22, C25).
# Only small vocabularies: a CTR-DNN trained on 200k rows could not learn pairs of slots with
# hundreds of ids (measured), so planting them would only widen its gap to the oracle.
_PAIRS = ((8, 19), (16, 22), (5, 13), (21, 24))


@dataclasses.dataclass
class TeacherConfig:
    """Settings of the planted model; the defaults are calibrated (see the module docstring)."""

    vocab: tuple[int, ...] = _VOCAB
    zipf_min: float = 1.25
    zipf_max: float = 1.3
    cat_missing: tuple[float, ...] = _CAT_MISSING
    dense_mu: tuple[float, ...] = _DENSE_MU
    dense_sigma: tuple[float, ...] = _DENSE_SIGMA
    dense_missing: tuple[float, ...] = _DENSE_MISSING
    dense_correlation: float = 0.5  # weight of the shared per-row latent in every dense field
    negative_rate: float = 0.03  # share of I2 values replaced by -1/-2, as seen in Criteo
    interaction_pairs: tuple[tuple[int, int], ...] = _PAIRS
    interaction_rank: int = 1
    # Target standard deviations of the logit components. Calibrated with the Paddle CTR-DNN peer
    # (200k rows, one epoch): the DNN learns main effects and the dense shapes, but categorical
    # interactions only slowly, so the non-linear dense part carries most of its lead over LR.
    main_std: float = 0.8
    interaction_std: float = 0.25
    dense_linear_std: float = 0.6
    dense_nonlinear_std: float = 1.2
    # An id expected n times in `reference_rows` rows keeps n / (n + shrink_count) of its effect:
    # effects sit on ids seen thousands of times, which 200k rows can estimate.
    reference_rows: int = 200_000
    shrink_count: float = 2000.0
    base_ctr: float = 0.25
    calibration_rows: int = 100_000


@dataclasses.dataclass
class Sample:
    """Raw generated rows before formatting."""

    label: np.ndarray  # int64 [n]
    counts: np.ndarray  # int64 [n, 13]
    dense_missing: np.ndarray  # bool [n, 13]
    ranks: np.ndarray  # int64 [n, 26], Zipf rank of the id within its slot
    cat_missing: np.ndarray  # bool [n, 26]
    prob: np.ndarray  # float64 [n], the teacher's click probability


class Teacher:
    """The planted model: vocabularies, hex spellings, effects and the sampler."""

    def __init__(self, seed: int, config: TeacherConfig | None = None) -> None:
        self.seed = seed
        self.config = config or TeacherConfig()
        cfg = self.config
        _check_config(cfg)
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0,)))
        exponents = rng.uniform(cfg.zipf_min, cfg.zipf_max, NUM_SPARSE)
        self.cdfs = []
        self.freqs = []
        for v, a in zip(cfg.vocab, exponents):
            p = np.arange(1, v + 1, dtype=np.float64) ** -a
            p /= p.sum()
            self.freqs.append(p)
            self.cdfs.append(np.cumsum(p))
        self.hex_tables = [_hex_table(seed, s, v) for s, v in enumerate(cfg.vocab)]
        self.main = [self._main_effects(rng, p) for p in self.freqs]
        self.pairs = [self._interaction(rng, a, b) for a, b in cfg.interaction_pairs]
        self.dense_lin = rng.normal(size=NUM_DENSE)
        self.dense_quad = -np.abs(rng.normal(size=NUM_DENSE))
        self.dense_cross = [(i, j, rng.normal()) for i, j in ((0, 4), (2, 8), (5, 12))]
        self.dense_mean = np.zeros(NUM_DENSE)
        self.dense_std = np.ones(NUM_DENSE)
        self.scales = np.ones(4)
        self.bias = 0.0
        self._calibrate()

    def _main_effects(self, rng: np.random.Generator, freq: np.ndarray) -> np.ndarray:
        # Slots differ in importance: a quarter carry almost nothing, as in real logs.
        importance = rng.choice((0.1, 0.6, 1.0, 1.4))
        expected = self.config.reference_rows * freq
        shrink = expected / (expected + self.config.shrink_count)
        return importance * rng.normal(size=freq.size) * shrink

    def _interaction(self, rng: np.random.Generator, a: int, b: int) -> np.ndarray:
        # Low-rank table sum_k u_k[i] v_k[j] with u, v centred under the slot frequencies: every
        # row and column of the table then has zero mean, so the pair adds no main effect.
        k = self.config.interaction_rank
        u = _centred_factors(rng, self.freqs[a], k, self.config)
        v = _centred_factors(rng, self.freqs[b], k, self.config)
        return u @ v.T

    def _calibrate(self) -> None:
        """Fixes the dense standardisation, the component scales and the bias on a fixed sample."""
        cfg = self.config
        rng = _split_rng(self.seed, "calibration", 0)
        counts, dmiss, ranks, cmiss = self._draw_features(rng, cfg.calibration_rows)
        z = _log_dense(counts, dmiss)
        self.dense_mean = z.mean(axis=0)
        self.dense_std = np.maximum(z.std(axis=0), 1e-6)
        parts = self._components(counts, dmiss, ranks, cmiss)
        targets = (cfg.main_std, cfg.interaction_std, cfg.dense_linear_std, cfg.dense_nonlinear_std)
        self.scales = np.array([t / max(p.std(), 1e-12) for t, p in zip(targets, parts)])
        logit = sum(s * p for s, p in zip(self.scales, parts))
        self.bias = _solve_bias(logit, cfg.base_ctr)

    def _draw_features(self, rng: np.random.Generator, n: int):
        cfg = self.config
        ranks = np.empty((n, NUM_SPARSE), dtype=np.int64)
        for s, cdf in enumerate(self.cdfs):
            ranks[:, s] = np.minimum(np.searchsorted(cdf, rng.random(n)), cdf.size - 1)
        cmiss = rng.random((n, NUM_SPARSE)) < np.asarray(cfg.cat_missing)
        rho = cfg.dense_correlation
        latent = rng.normal(size=(n, 1))
        normal = rho * latent + np.sqrt(1 - rho * rho) * rng.normal(size=(n, NUM_DENSE))
        log_counts = np.asarray(cfg.dense_mu) + np.asarray(cfg.dense_sigma) * normal
        counts = np.floor(np.exp(np.minimum(log_counts, 20.0))).astype(np.int64)
        negative = rng.random(n) < cfg.negative_rate
        counts[negative, 1] = -rng.integers(1, 3, int(negative.sum()))
        dmiss = rng.random((n, NUM_DENSE)) < np.asarray(cfg.dense_missing)
        return counts, dmiss, ranks, cmiss

    def _components(self, counts, dmiss, ranks, cmiss) -> list[np.ndarray]:
        """Unscaled logit parts: main effects, interactions, dense linear, dense non-linear."""
        main = np.zeros(ranks.shape[0])
        for s, w in enumerate(self.main):
            main += np.where(cmiss[:, s], 0.0, w[ranks[:, s]])
        inter = np.zeros(ranks.shape[0])
        for (a, b), table in zip(self.config.interaction_pairs, self.pairs):
            term = table[ranks[:, a], ranks[:, b]]
            inter += np.where(cmiss[:, a] | cmiss[:, b], 0.0, term)
        zs = (_log_dense(counts, dmiss) - self.dense_mean) / self.dense_std
        linear = zs @ self.dense_lin
        # Bumps (CTR peaks at typical activity), products and a wave: even functions and
        # interactions, so a linear model on the same inputs gets (almost) none of this part.
        nonlinear = (zs * zs - 1.0) @ self.dense_quad
        for i, j, c in self.dense_cross:
            nonlinear += c * zs[:, i] * zs[:, j]
        nonlinear += np.cos(2.0 * zs[:, 6])
        return [main, inter, linear, nonlinear]

    def sample(self, rng: np.random.Generator, n: int) -> Sample:
        """Draws ``n`` rows and their labels from the teacher."""
        counts, dmiss, ranks, cmiss = self._draw_features(rng, n)
        parts = self._components(counts, dmiss, ranks, cmiss)
        logit = self.bias + sum(s * p for s, p in zip(self.scales, parts))
        prob = baselines.sigmoid(logit)
        label = (rng.random(n) < prob).astype(np.int64)
        return Sample(label, counts, dmiss, ranks, cmiss, prob)

    def format(self, sample: Sample) -> bytes:
        """The rows of ``sample`` as Criteo TSV bytes, one LF-terminated line per row."""
        n = sample.label.shape[0]
        blocks = [(ord("0") + sample.label).astype(np.uint8)[:, None], _column(n, 9)]
        ints = _format_ints(np.where(sample.dense_missing, 0, sample.counts), sample.dense_missing)
        for j in range(NUM_DENSE):
            blocks += [ints[:, j], _column(n, 9)]
        for s in range(NUM_SPARSE):
            hexes = self.hex_tables[s][sample.ranks[:, s]]
            hexes[sample.cat_missing[:, s]] = 0
            blocks += [hexes, _column(n, 9 if s < NUM_SPARSE - 1 else 10)]
        matrix = np.concatenate(blocks, axis=1).ravel()
        # Zero bytes are padding of short or missing fields; dropping them joins the fields.
        return matrix[matrix != 0].tobytes()


def _check_config(cfg: TeacherConfig) -> None:
    for name, size in (
        ("vocab", NUM_SPARSE),
        ("cat_missing", NUM_SPARSE),
        ("dense_mu", NUM_DENSE),
        ("dense_sigma", NUM_DENSE),
        ("dense_missing", NUM_DENSE),
    ):
        if len(getattr(cfg, name)) != size:
            raise ValueError(
                f"TeacherConfig.{name} needs {size} entries, got {len(getattr(cfg, name))}"
            )
    if max(cfg.vocab) > 1 << 24:  # _hex_table keeps the rank below the slot bits
        raise ValueError(f"TeacherConfig.vocab: at most {1 << 24} ids per slot")
    for a, b in cfg.interaction_pairs:
        if not (0 <= a < NUM_SPARSE and 0 <= b < NUM_SPARSE and a != b):
            raise ValueError(f"TeacherConfig.interaction_pairs: bad slot pair ({a}, {b})")
    if not 0 < cfg.base_ctr < 1:
        raise ValueError(f"TeacherConfig.base_ctr must be in (0, 1), got {cfg.base_ctr}")


def _centred_factors(rng, freq: np.ndarray, k: int, cfg: TeacherConfig) -> np.ndarray:
    expected = cfg.reference_rows * freq
    f = rng.normal(size=(freq.size, k)) * (expected / (expected + cfg.shrink_count))[:, None]
    f -= freq @ f  # zero mean under the slot's id distribution
    return f / np.sqrt(np.maximum(freq @ (f * f), 1e-12))


def _log_dense(counts: np.ndarray, missing: np.ndarray) -> np.ndarray:
    return np.where(missing, 0.0, np.log1p(np.maximum(counts, 0)))


def _solve_bias(logit: np.ndarray, target: float) -> float:
    lo, hi = -20.0, 20.0
    for _ in range(60):  # bisection: mean sigmoid is monotone in the bias
        mid = 0.5 * (lo + hi)
        if baselines.sigmoid(logit + mid).mean() < target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _split_rng(seed: int, split: str, chunk: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_SPLIT_IDS[split], chunk)))


def _hex_table(seed: int, slot: int, vocab: int) -> np.ndarray:
    """ASCII of 8 lowercase hex digits [vocab, 8] per id: a 32-bit hash of (seed, slot, rank)."""
    keys = (np.uint64(seed & 0xFFFFFFFF) << np.uint64(32)) ^ (np.uint64(slot) << np.uint64(24))
    values = criteo_reader.mix64(np.arange(vocab, dtype=np.uint64) ^ keys) & np.uint64(0xFFFFFFFF)
    nibbles = (values[:, None] >> (np.uint64(4) * np.arange(7, -1, -1, dtype=np.uint64))) & 15
    return np.frombuffer(b"0123456789abcdef", dtype=np.uint8)[nibbles.astype(np.int64)]


def _column(n: int, byte: int) -> np.ndarray:
    return np.full((n, 1), byte, dtype=np.uint8)


def _format_ints(values: np.ndarray, missing: np.ndarray) -> np.ndarray:
    """Right-aligned ASCII [n, cols, width] of int64 values; 0 bytes pad, missing is all 0."""
    magnitude = np.abs(values)
    width = len(str(int(magnitude.max(initial=0)))) + 1  # one spare column for '-'
    power = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)
    digits = (magnitude[..., None] // power) % 10
    ndigits = np.maximum(1, np.floor(np.log10(np.maximum(magnitude, 1))).astype(np.int64) + 1)
    position = np.arange(width)
    first = width - ndigits[..., None]
    out = np.where(position >= first, digits + ord("0"), 0)
    out = np.where((position == first - 1) & (values[..., None] < 0), ord("-"), out)
    out[missing] = 0
    return out.astype(np.uint8)


def write_split(teacher: Teacher, split: str, rows: int, paths: list[str]) -> np.ndarray:
    """Writes ``rows`` rows of ``split`` spread evenly over ``paths``; returns the label/prob pairs.

    Rows come in fixed chunks with their own random streams, so the concatenated output is the same
    whatever the number of files.
    """
    bounds = np.linspace(0, rows, len(paths) + 1).astype(np.int64)
    files = [open(p, "wb") for p in paths]
    out = np.empty((rows, 2))
    try:
        for chunk, lo in enumerate(range(0, rows, CHUNK_ROWS)):
            hi = min(lo + CHUNK_ROWS, rows)
            sample = teacher.sample(_split_rng(teacher.seed, split, chunk), hi - lo)
            out[lo:hi, 0] = sample.label
            out[lo:hi, 1] = sample.prob
            # A chunk may straddle file boundaries: format and write each piece separately.
            for f, (a, b) in zip(files, zip(bounds[:-1], bounds[1:])):
                s, e = max(a, lo), min(b, hi)
                if s < e:
                    f.write(teacher.format(_slice(sample, s - lo, e - lo)))
    finally:
        for f in files:
            f.close()
    return out


def _slice(sample: Sample, lo: int, hi: int) -> Sample:
    return Sample(*(getattr(sample, f.name)[lo:hi] for f in dataclasses.fields(Sample)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Writes Criteo-format train/test files from a planted CTR model.",
        epilog="Prints oracle_auc=<teacher AUC on the test file>; writes DIR/oracle.json.",
    )
    parser.add_argument("--out", required=True, help="output folder (created if missing)")
    parser.add_argument("--train_rows", type=int, default=200_000)
    parser.add_argument("--test_rows", type=int, default=50_000)
    parser.add_argument(
        "--train_parts",
        type=int,
        default=1,
        help="split train into K files train-00000.txt ... (default: train.txt)",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.train_rows < 0 or args.test_rows < 2 or args.train_parts < 1:
        parser.error("need --train_rows >= 0, --test_rows >= 2, --train_parts >= 1")
    os.makedirs(args.out, exist_ok=True)
    start = time.perf_counter()
    teacher = Teacher(args.seed)
    if args.train_parts == 1:
        train_paths = [os.path.join(args.out, "train.txt")]
    else:
        train_paths = [
            os.path.join(args.out, f"train-{k:05d}.txt") for k in range(args.train_parts)
        ]
    train = write_split(teacher, "train", args.train_rows, train_paths)
    test = write_split(teacher, "test", args.test_rows, [os.path.join(args.out, "test.txt")])
    oracle_auc = baselines.roc_auc(test[:, 0], test[:, 1])
    report = {
        "oracle_auc": oracle_auc,
        "oracle_test_logloss": baselines.log_loss(test[:, 0], test[:, 1]),
        "train_ctr": float(train[:, 0].mean()) if args.train_rows else None,
        "test_ctr": float(test[:, 0].mean()),
        "seed": args.seed,
        "train_rows": args.train_rows,
        "test_rows": args.test_rows,
        "train_files": [os.path.basename(p) for p in train_paths],
        "teacher_config": dataclasses.asdict(teacher.config),
        "seconds": time.perf_counter() - start,
    }
    with open(os.path.join(args.out, "oracle.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(
        f"wrote {args.train_rows} train rows to {len(train_paths)} file(s) and "
        f"{args.test_rows} test rows in {report['seconds']:.1f}s; "
        f"test_ctr={report['test_ctr']:.4f}"
    )
    print(f"oracle_auc={oracle_auc:.5f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
