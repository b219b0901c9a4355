"""word2vec's two readers draw pairs alike: with hyper_parameters.subsample, the DataLoader
reader (word2vec_reader.py, which static_infer reads the held-out text with) keeps a word as
often as the QueueDataset reader (queuedataset_reader.py, which trains the big config) does, so
the held-out pairs are drawn as the training pairs are. Run in-process on the sample corpus of
models/recall/word2vec/data."""

from __future__ import annotations

import collections
import importlib.util
import pathlib

import numpy as np
import pytest

from fleet.rec.config import load_config

FOLDER = pathlib.Path(__file__).resolve().parents[3] / "models" / "recall" / "word2vec"
TRAIN_FILES = sorted(str(p) for p in (FOLDER / "data" / "train").iterdir())
# On the sample corpus (9,600 words) 0.003 makes the threshold 28.8: 38 words seen more often
# (5,432 of the words) are kept with probability 0.64 on the whole, 262 rarer ones always.
SUBSAMPLE = 0.003


def _module(name: str):
    spec = importlib.util.spec_from_file_location(f"w2v_{name}", FOLDER / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _config(subsample: float | None):
    overrides = [] if subsample is None else [f"hyper_parameters.subsample={subsample}"]
    return load_config(str(FOLDER / "config.yaml"), overrides)


def _counts() -> np.ndarray:
    with open(FOLDER / "data" / "dict" / "word_count_dict.txt") as f:
        return np.array([float(line.split()[1]) for line in f])


def _dataloader_centres(subsample: float | None) -> collections.Counter:
    reader = _module("word2vec_reader").RecDataset(TRAIN_FILES, _config(subsample))
    return collections.Counter(int(sample[0][0]) for sample in reader)


def _queue_centres(subsample: float | None) -> collections.Counter:
    reader = _module("queuedataset_reader").Reader()
    reader.init(_config(subsample))
    centres = collections.Counter()
    for path in TRAIN_FILES:
        with open(path) as f:
            for line in f:
                for sample in reader.generate_sample(line):
                    centres[int(sample[0][1][0])] += 1
    return centres


def test_the_dataloader_reader_is_the_same_each_pass_and_unchanged_without_subsample():
    config = _config(SUBSAMPLE)
    reader = _module("word2vec_reader").RecDataset(TRAIN_FILES, config)
    first = [tuple(int(v) for part in sample for v in part) for sample in reader]
    again = [tuple(int(v) for part in sample for v in part) for sample in reader]
    assert first == again  # static_infer scores the same held-out pairs every run
    plain = _dataloader_centres(None)
    assert len(first) < sum(plain.values())


@pytest.mark.parametrize("centres_of", [_dataloader_centres, _queue_centres])
def test_both_readers_keep_a_word_with_word2vecs_probability(centres_of):
    counts = _counts()
    threshold = SUBSAMPLE * counts.sum()
    keep = np.minimum(1.0, (np.sqrt(counts / threshold) + 1.0) * threshold / counts)
    frequent, rare = np.flatnonzero(keep < 0.95), np.flatnonzero(keep >= 1.0)
    expected = (counts[frequent] * keep[frequent]).sum() / counts[frequent].sum()
    assert 0.6 < expected < 0.7 and len(rare) > 100
    plain, subsampled = centres_of(None), centres_of(SUBSAMPLE)

    def kept(words):  # the share of the words' pairs (as centre) left by subsampling
        return sum(subsampled[w] for w in words) / sum(plain[w] for w in words)

    # Sentences that lose words lose pairs at their ends too: the words always kept keep about
    # 96% of their pairs, so the frequent words' share is taken relative to theirs. Seen over
    # 12 seeds of the QueueDataset reader: 0.640 +- 0.009; the bound is 4 of those.
    assert kept(rare) > 0.9
    assert kept(frequent) / kept(rare) == pytest.approx(expected, abs=0.04)
