"""Corpus preparation for word2vec: tokens, vocabulary, training parts and held-out text.

    python examples/word2vec/corpus.py --corpus ../shared/data/text_corpus --out w2v_data \\
        --max_words 2000000 --parts 4

Every ``*.txt`` file under ``--corpus`` (sorted by path; README files are documentation and are
skipped) is lower-cased and split into words (letters, with an inner apostrophe). The first
``--max_words`` tokens form the corpus; its last ``--heldout`` fraction (5 %) is held out for
evaluation, the rest is the training text. The vocabulary holds the training words seen at
least ``--min_count`` times, ids by decreasing count (id 0 the most frequent); other words are
dropped, as in word2vec.

Written to ``--out``: ``vocab.txt`` (``word count`` per line, line i = id i), ``train-NNNN``
(``--parts`` files of word ids, ``--line_words`` per line, contiguous slices of the training
text) and ``heldout.txt`` (the held-out ids, same layout), then ``meta.json`` last, so a folder
with ``meta.json`` is complete.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys
from collections.abc import Iterator

import numpy as np

_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


def corpus_files(root: str) -> list[str]:
    """The ``*.txt`` files under ``root``, sorted by path (the corpus order)."""
    found = []
    for folder, _, names in os.walk(root):
        found += [os.path.join(folder, n) for n in names if n.endswith(".txt")]
    return sorted(found)


def tokens(paths: list[str], max_words: int = 0) -> Iterator[str]:
    """The lower-cased words of the files in order, at most ``max_words`` (0: all)."""
    count = 0
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                for word in _WORD.findall(line.lower()):
                    yield word
                    count += 1
                    if max_words and count >= max_words:
                        return


def build_vocab(words: list[str], min_count: int) -> tuple[list[str], np.ndarray]:
    """Words seen at least ``min_count`` times, by decreasing count (ties by word), and counts."""
    counts = collections.Counter(words)
    kept = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
    return kept, np.array([counts[w] for w in kept], dtype=np.int64)


def read_vocab(path: str) -> tuple[list[str], np.ndarray]:
    words, counts = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            word, count = line.split()
            words.append(word)
            counts.append(int(count))
    return words, np.array(counts, dtype=np.int64)


def read_ids(path: str) -> np.ndarray:
    """All ids of a parts or held-out file, in order."""
    with open(path) as f:
        return np.array(f.read().split(), dtype=np.int64)


def _write_ids(path: str, ids: np.ndarray, line_words: int) -> None:
    with open(path, "w") as f:
        for start in range(0, len(ids), line_words):
            f.write(" ".join(map(str, ids[start : start + line_words].tolist())) + "\n")


def prepare(
    corpus: str,
    out: str,
    max_words: int = 0,
    min_count: int = 5,
    parts: int = 4,
    heldout: float = 0.05,
    line_words: int = 1000,
) -> dict:
    """Writes the files described in the module docstring; returns the contents of meta.json."""
    paths = corpus_files(corpus)
    if not paths:
        raise FileNotFoundError(f"no .txt files under {corpus}")
    words = list(tokens(paths, max_words))
    split = int(len(words) * (1.0 - heldout))
    vocab, counts = build_vocab(words[:split], min_count)
    index = {w: i for i, w in enumerate(vocab)}
    train_ids = np.array([index[w] for w in words[:split] if w in index], dtype=np.int64)
    held_ids = np.array([index[w] for w in words[split:] if w in index], dtype=np.int64)
    os.makedirs(out, exist_ok=True)
    meta_path = os.path.join(out, "meta.json")
    if os.path.exists(meta_path):
        os.remove(meta_path)
    with open(os.path.join(out, "vocab.txt"), "w", encoding="utf-8") as f:
        f.writelines(f"{w} {c}\n" for w, c in zip(vocab, counts.tolist()))
    files = []
    for p, chunk in enumerate(np.array_split(train_ids, parts)):
        files.append(f"train-{p:04d}")
        _write_ids(os.path.join(out, files[-1]), chunk, line_words)
    _write_ids(os.path.join(out, "heldout.txt"), held_ids, line_words)
    meta = {
        "corpus_tokens": len(words),
        "train_tokens": int(len(train_ids)),
        "heldout_tokens": int(len(held_ids)),
        "vocab_size": len(vocab),
        "min_count": min_count,
        "train_files": files,
    }
    with open(meta_path + ".tmp", "w") as f:
        json.dump(meta, f)
    os.replace(meta_path + ".tmp", meta_path)
    return meta


def load_meta(folder: str) -> dict:
    path = os.path.join(folder, "meta.json")
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"{folder} holds no prepared corpus (no meta.json): run "
            "examples/word2vec/corpus.py --out " + folder
        )
    with open(path) as f:
        return json.load(f)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", required=True, help="folder of .txt files")
    parser.add_argument("--out", required=True, help="folder to write")
    parser.add_argument("--max_words", type=int, default=0, help="corpus tokens kept (0: all)")
    parser.add_argument("--min_count", type=int, default=5)
    parser.add_argument("--parts", type=int, default=4, help="training files (>= readers)")
    parser.add_argument("--heldout", type=float, default=0.05, help="held-out fraction (the end)")
    args = parser.parse_args(argv)
    if not os.path.isdir(args.corpus):
        print(f"error: corpus folder {args.corpus} does not exist", file=sys.stderr)
        return 2
    meta = prepare(args.corpus, args.out, args.max_words, args.min_count, args.parts, args.heldout)
    print(json.dumps(meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
