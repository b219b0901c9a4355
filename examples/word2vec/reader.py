"""Skip-gram training samples from word ids, as in word2vec (Mikolov et al., 2013, "Distributed
Representations of Words and Phrases and their Compositionality"):

* subsampling of frequent words: a word of count c in a text of T words is kept with
  probability (sqrt(c / (s T)) + 1) (s T) / c, the formula of the reference word2vec.c (s, the
  ``sample`` threshold, 1e-3 by default);
* a dynamic window: for each centre word a width b drawn uniformly from 1..window, every word
  within b positions (in the same line) is a context word;
* negatives drawn from the unigram distribution raised to the 3/4 power; a negative equal to the
  context word is drawn again once.

``python reader.py --vocab vocab.txt`` is the pipe_command of the training dataset: lines of word
ids on stdin, one MultiSlot sample per (centre, context) pair on stdout with the slots
``centre`` (1 id) and ``targets`` (the context id, then ``negatives`` ids). Each epoch, every
reader process draws its own subsampling, windows and negatives (seeded by ``--seed`` and its
process id).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

SLOTS = ("centre", "targets")


class Sampler:
    """Draws subsampling masks, windows and negatives for one vocabulary (counts by id)."""

    def __init__(
        self,
        counts: np.ndarray,
        window: int = 5,
        negatives: int = 5,
        sample: float = 1e-3,
        seed: int = 0,
    ) -> None:
        counts = np.asarray(counts, dtype=np.float64)
        self.window, self.negatives = window, negatives
        self.rng = np.random.default_rng(seed)
        threshold = sample * counts.sum()
        self.keep = (
            np.minimum(1.0, (np.sqrt(counts / threshold) + 1.0) * threshold / counts)
            if sample > 0
            else np.ones_like(counts)
        )
        weights = counts**0.75
        self.cumulative = np.cumsum(weights / weights.sum())

    def subsample(self, ids: np.ndarray) -> np.ndarray:
        return ids[self.rng.random(len(ids)) < self.keep[ids]]

    def pairs(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(centre, context) id pairs of one line, ordered by centre position."""
        n = len(ids)
        widths = self.rng.integers(1, self.window + 1, size=n)
        positions, contexts = [], []
        for d in range(1, self.window + 1):
            near = np.flatnonzero(widths >= d)
            for other in (near - d, near + d):
                ok = (other >= 0) & (other < n)
                positions.append(near[ok])
                contexts.append(other[ok])
        pos = np.concatenate(positions)
        ctx = np.concatenate(contexts)
        order = np.argsort(pos, kind="stable")
        return ids[pos[order]], ids[ctx[order]]

    def draw_negatives(self, context: np.ndarray) -> np.ndarray:
        """[len(context), negatives] ids from unigram^0.75, none equal to its row's context
        after one redraw of the clashes (a clash twice in a row is kept; it is rare)."""
        shape = (len(context), self.negatives)
        neg = np.searchsorted(self.cumulative, self.rng.random(shape), side="right")
        clash = neg == context[:, None]
        neg[clash] = np.searchsorted(
            self.cumulative, self.rng.random(int(clash.sum())), side="right"
        )
        return np.minimum(neg, len(self.cumulative) - 1)


def make_pipe_reader(counts: np.ndarray, window: int, negatives: int, sample: float, seed: int):
    """A MultiSlotStringDataGenerator (the ids formatted once per line, with NumPy) writing one
    sample per (centre, context) pair of each input line."""
    from fleet.data_generator import MultiSlotStringDataGenerator

    sampler = Sampler(counts, window, negatives, sample, seed)

    class SkipGramReader(MultiSlotStringDataGenerator):
        def generate_sample(self, line: str):  # noqa: ANN202
            ids = np.array(line.split(), dtype=np.int64)
            centre, context = sampler.pairs(sampler.subsample(ids))
            if not len(centre):
                return []
            targets = np.concatenate([context[:, None], sampler.draw_negatives(context)], axis=1)
            centre_s = centre.astype(str)
            targets_s = targets.astype(str).tolist()
            return [[(SLOTS[0], [c]), (SLOTS[1], t)] for c, t in zip(centre_s.tolist(), targets_s)]

    reader = SkipGramReader()
    reader.set_batch(4096)
    return reader


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--vocab", required=True, help="vocab.txt of corpus.py")
    parser.add_argument("--window", type=int, default=5)
    parser.add_argument("--negatives", type=int, default=5)
    parser.add_argument("--sample", type=float, default=1e-3, help="subsampling threshold")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import corpus

    _, counts = corpus.read_vocab(args.vocab)
    seed = args.seed * 1_000_003 + os.getpid()
    make_pipe_reader(counts, args.window, args.negatives, args.sample, seed).run_from_stdin()
    return 0


if __name__ == "__main__":
    sys.exit(main())
