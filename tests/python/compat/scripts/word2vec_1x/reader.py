# The pipe_command reader of PaddleRec 1.7's word2vec: lines of word ids in, one sample per
# (centre, context) pair out, the context within a window of random width, neg_num negatives
# drawn from the word counts raised to the 3/4 power. argv: dict file ("id count" lines),
# neg_num, window_size. Ported by the import below and nothing else.
import sys

import numpy as np

import fleet.data_generator as dg  # was: import paddle.fluid.incubate.data_generator as dg


class Word2VecReader(dg.MultiSlotDataGenerator):
    def init(self, dict_path, neg_num, window_size):
        self.neg_num, self.window_size = neg_num, window_size
        with open(dict_path) as f:
            counts = np.array([float(line.split()[1]) for line in f])
        self.cs = np.cumsum(counts**0.75 / (counts**0.75).sum())

    def get_context_words(self, words, idx):
        width = np.random.randint(1, self.window_size + 1)
        start = max(0, idx - width)
        return words[start:idx] + words[idx + 1 : idx + width + 1]

    def generate_sample(self, line):
        def reader():
            word_ids = [int(w) for w in line.split()]
            for idx, target_id in enumerate(word_ids):
                for context_id in self.get_context_words(word_ids, idx):
                    neg_array = self.cs.searchsorted(np.random.sample(self.neg_num))
                    neg_array = np.minimum(neg_array, len(self.cs) - 1)
                    yield [
                        ("input_word", [int(target_id)]),
                        ("true_label", [int(context_id)]),
                        ("neg_label", [int(x) for x in neg_array]),
                    ]

        return reader


if __name__ == "__main__":
    word2vec_reader = Word2VecReader()
    word2vec_reader.init(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
    word2vec_reader.run_from_stdin()
