"""Skip-gram samples for QueueDataset / InmemoryDataset (runner.pipe_command:
`python queuedataset_reader.py`), the same samples as word2vec_reader.py draws for the DataLoader,
made a line at a time with NumPy so that a reader process keeps up with the trainer threads on
the big corpus (config_bigdata.yaml; the per-word Python loop of word2vec_reader.py does not).

For every word of a line, each word within a random window around it (1 to window_size words
each side) is a true context, with neg_num negatives drawn from the unigram counts raised to the
3/4 power (Mikolov et al., 2013). With `hyper_parameters.subsample` (word2vec's `sample`, e.g.
1e-3) a word of count c in a corpus of T words is first kept with probability
(sqrt(c / (s T)) + 1) s T / c, as word2vec.c and PaddleRec's preprocess.py --downsample do.
Run by the dataset with the config's path and the `common` helpers' folder as its arguments."""

import os
import sys

import numpy as np

import fleet.data_generator as dg

SLOTS = ("input_word", "true_label", "neg_label")


class Reader(dg.MultiSlotStringDataGenerator):
    def init(self, config):
        self.window_size = int(config.get("hyper_parameters.window_size"))
        self.neg_num = int(config.get("hyper_parameters.neg_num"))
        with open(config.get("runner.word_count_dict_path")) as f:
            counts = np.array([float(line.split()[1]) for line in f])
        weights = counts**0.75
        self.cumulative = np.cumsum(weights / weights.sum())
        sample = float(config.get("hyper_parameters.subsample") or 0.0)
        threshold = sample * counts.sum()
        self.keep = (
            np.minimum(1.0, (np.sqrt(counts / threshold) + 1.0) * threshold / counts)
            if sample > 0
            else None
        )
        # Each reader process draws its own windows and negatives.
        self.rng = np.random.default_rng((config.get("runner.seed") or 1) * 1_000_003 + os.getpid())

    def pairs(self, words):
        """(centre, context) ids of one line, by centre position."""
        n = len(words)
        spans = self.rng.integers(1, self.window_size + 1, size=n)
        centres, contexts = [], []
        for d in range(1, self.window_size + 1):
            near = np.flatnonzero(spans >= d)
            for other in (near - d, near + d):
                ok = (other >= 0) & (other < n)
                centres.append(near[ok])
                contexts.append(other[ok])
        centre = np.concatenate(centres)
        order = np.argsort(centre, kind="stable")
        return words[centre[order]], words[np.concatenate(contexts)[order]]

    def generate_sample(self, line):
        words = np.array(line.split(), dtype=np.int64)
        if self.keep is not None:
            words = words[self.rng.random(len(words)) < self.keep[words]]
        centre, context = self.pairs(words)
        if not len(centre):
            return []
        negatives = np.searchsorted(
            self.cumulative, self.rng.random((len(centre), self.neg_num)), side="right"
        )
        negatives = np.minimum(negatives, len(self.cumulative) - 1)
        centre_s = centre.astype(str).tolist()
        context_s = context.astype(str).tolist()
        negatives_s = negatives.astype(str).tolist()
        return [
            [(SLOTS[0], [c]), (SLOTS[1], [t]), (SLOTS[2], n)]
            for c, t, n in zip(centre_s, context_s, negatives_s)
        ]


if __name__ == "__main__":
    yaml_path, utils_path = sys.argv[1], sys.argv[2]
    sys.path.append(utils_path)
    import common

    reader = Reader()
    reader.init(common.YamlHelper().load_yaml(yaml_path))
    reader.run_from_stdin()
