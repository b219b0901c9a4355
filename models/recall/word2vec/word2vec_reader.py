"""Skip-gram samples from lines of word ids (PaddleRec's word2vec_reader.py, for the DataLoader
reader): for every word of a line, each word within a random window around it (1 to
window_size words each side) is a true context, with neg_num negatives drawn from the unigram
counts raised to the 3/4 power (Mikolov et al., 2013). A sample is [input_word [1],
true_word [1], neg_words [neg_num]], in the order of StaticModel.create_feeds().

With `hyper_parameters.subsample` the words of a line are first subsampled as
queuedataset_reader.py does for training, so that static_infer scores held-out pairs drawn as
the training pairs are (and as examples/word2vec's held-out AUC draws them). Without it every
pair counts, and the pooled AUC is mostly that of the few most frequent words, whose rows a
constant learning rate leaves noisy at the end of an epoch (see config_bigdata.yaml)."""

import numpy as np


class RecDataset:
    def __init__(self, file_list, config):
        self.file_list = file_list
        self.window_size = config.get("hyper_parameters.window_size")
        self.neg_num = config.get("hyper_parameters.neg_num")
        counts = []
        with open(config.get("runner.word_count_dict_path")) as f:
            for line in f:
                counts.append(float(line.split()[1]))
        weights = np.array(counts) ** 0.75
        self.cumulative = np.cumsum(weights / weights.sum())
        self.seed = config.get("runner.seed") or 1
        sample = float(config.get("hyper_parameters.subsample") or 0.0)
        counts = np.array(counts)
        threshold = sample * counts.sum()
        # word2vec.c's keep probability of a word of count c: (sqrt(c / (s T)) + 1) s T / c.
        self.keep = (
            np.minimum(1.0, (np.sqrt(counts / threshold) + 1.0) * threshold / counts)
            if sample > 0
            else None
        )

    def __iter__(self):
        rng = np.random.default_rng(self.seed)
        for path in self.file_list:
            with open(path) as f:
                for line in f:
                    words = [int(w) for w in line.split()]
                    if self.keep is not None:
                        draws = rng.random(len(words))
                        words = [w for w, u in zip(words, draws) if u < self.keep[w]]
                    for i, word in enumerate(words):
                        span = int(rng.integers(1, self.window_size + 1))
                        for j in range(max(0, i - span), min(len(words), i + span + 1)):
                            if j == i:
                                continue
                            draws = rng.random(self.neg_num)
                            negatives = np.searchsorted(self.cumulative, draws, side="right")
                            negatives = np.minimum(negatives, len(self.cumulative) - 1)
                            yield [
                                np.array([word], dtype="int64"),
                                np.array([words[j]], dtype="int64"),
                                negatives.astype("int64"),
                            ]
