"""Writes the sample corpus of this folder: sentences of word ids from a planted topic model,
so that skip-gram has co-occurrences to learn and a held-out file to be scored on.

    python models/recall/word2vec/data/make_sample.py   (writes train/, test/, dict/ here)

300 words: ids 0-19 are "function words" found in every sentence, ids 20-299 six topics of 46-47
words. A sentence picks one topic and draws 12 words: 3 function words, 9 topic words, each by
a Zipf-like frequency. A word's context is then mostly words of its own topic."""

import os

import numpy as np

VOCAB, FUNCTION_WORDS, TOPICS, LENGTH = 300, 20, 6, 12


def sentences(rng, count):
    topic_words = np.array_split(np.arange(FUNCTION_WORDS, VOCAB), TOPICS)
    for _ in range(count):
        words = topic_words[rng.integers(TOPICS)]
        weights = 1.0 / np.arange(1, len(words) + 1)
        topical = rng.choice(words, size=LENGTH - 3, p=weights / weights.sum())
        common = rng.integers(0, FUNCTION_WORDS, size=3)
        sentence = np.concatenate([topical, common])
        rng.shuffle(sentence)
        yield sentence


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    rng = np.random.default_rng(11)
    counts = np.zeros(VOCAB, dtype=np.int64)
    for name, count in (
        ("train/part-0.txt", 400),
        ("train/part-1.txt", 400),
        ("test/part-0.txt", 100),
    ):
        path = os.path.join(here, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            for sentence in sentences(rng, count):
                if name.startswith("train"):
                    np.add.at(counts, sentence, 1)
                f.write(" ".join(map(str, sentence)) + "\n")
    os.makedirs(os.path.join(here, "dict"), exist_ok=True)
    with open(os.path.join(here, "dict", "word_count_dict.txt"), "w") as f:
        for word, count in enumerate(counts):
            f.write(f"{word} {max(int(count), 1)}\n")


if __name__ == "__main__":
    main()
