"""Skip-gram samples from lines of word ids (PaddleRec's word2vec_reader.py, for the DataLoader
reader): for every word of a line, each word within a random window around it (1 to
window_size words each side) is a true context, with neg_num negatives drawn from the unigram
counts raised to the 3/4 power (Mikolov et al., 2013). A sample is [input_word [1],
true_word [1], neg_words [neg_num]], in the order of StaticModel.create_feeds()."""

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

    def __iter__(self):
        rng = np.random.default_rng(self.seed)
        for path in self.file_list:
            with open(path) as f:
                for line in f:
                    words = [int(w) for w in line.split()]
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
