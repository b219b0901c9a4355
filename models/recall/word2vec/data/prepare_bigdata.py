"""Prepares the big corpus of config_bigdata.yaml in PaddleRec's layout (train/, test/, dict/):
the shared text corpus tokenised and cut into lines of 1000 words, 5 % of the lines drawn at
random across the corpus as the held-out text (test/), the other lines shuffled and dealt into
the training parts (train/), and the vocabulary of the training lines (dict/: words seen 5 times
or more, ids by decreasing count).

    python models/recall/word2vec/data/prepare_bigdata.py \\
        [--corpus ../shared/data/text_corpus] [--out .cache/word2vec/text_corpus]

Why shuffled: the corpus is 137 books in a row. Written in corpus order, with the last 5 % held
out, one process ended its epoch on the text nearest the held-out and a 2-worker job (worker 0
reading the first half of the corpus all epoch) did not, so modes differed by data order as much
as by training (models/README.md, "Measuring the big configs"). With every part a random draw of
the same lines, every worker and every mode sees the same mix.

Prints the vocabulary size: config_bigdata.yaml's sparse_feature_number is the one of the whole
corpus with the default seed; with --max_words or another --seed, set it to the printed one."""

import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.normpath(os.path.join(HERE, "..", "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO_ROOT, "examples", "word2vec"))

import corpus  # noqa: E402

LINE_WORDS = 1000
MIN_COUNT = 5
HELDOUT = 0.05


def write_lines(path, lines, index):
    """Each line's in-vocabulary word ids, space-separated, one line of text per line."""
    with open(path, "w") as f:
        for line in lines:
            f.write(" ".join(str(index[w]) for w in line if w in index) + "\n")


def prepare(corpus_dir, out, max_words=0, parts=4, seed=0):
    """Writes train/train-NNNN, test/heldout.txt, dict/word_count_dict.txt and meta.json;
    returns the meta (vocab_size, tokens)."""
    paths = corpus.corpus_files(corpus_dir)
    if not paths:
        raise FileNotFoundError(f"no .txt files under {corpus_dir}")
    words = list(corpus.tokens(paths, max_words))
    lines = [words[i : i + LINE_WORDS] for i in range(0, len(words), LINE_WORDS)]
    order = np.random.default_rng(seed).permutation(len(lines))
    held_count = max(1, round(len(lines) * HELDOUT))
    held = [lines[i] for i in sorted(order[:held_count].tolist())]
    train = [lines[i] for i in order[held_count:].tolist()]
    vocab, counts = corpus.build_vocab([w for line in train for w in line], MIN_COUNT)
    index = {w: i for i, w in enumerate(vocab)}
    for folder in ("train", "test", "dict"):
        os.makedirs(os.path.join(out, folder), exist_ok=True)
    files = [f"train-{p:04d}" for p in range(parts)]
    for p, name in enumerate(files):
        write_lines(os.path.join(out, "train", name), train[p::parts], index)
    write_lines(os.path.join(out, "test", "heldout.txt"), held, index)
    with open(os.path.join(out, "dict", "word_count_dict.txt"), "w", encoding="utf-8") as f:
        f.writelines(f"{w} {c}\n" for w, c in zip(vocab, counts.tolist()))
    meta = {
        "corpus_tokens": len(words),
        "train_tokens": sum(sum(w in index for w in line) for line in train),
        "heldout_tokens": sum(sum(w in index for w in line) for line in held),
        "vocab_size": len(vocab),
        "min_count": MIN_COUNT,
        "seed": seed,
        "train_files": files,
    }
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f)
    return meta


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--corpus", default=os.path.join(REPO_ROOT, "..", "shared", "data", "text_corpus")
    )
    parser.add_argument(
        "--out", default=os.path.join(REPO_ROOT, ".cache", "word2vec", "text_corpus")
    )
    parser.add_argument("--max_words", type=int, default=0, help="corpus tokens kept (0: all)")
    parser.add_argument("--parts", type=int, default=4, help="training files (>= workers)")
    parser.add_argument("--seed", type=int, default=0, help="the draw of held-out and parts")
    args = parser.parse_args()
    if not os.path.isdir(args.corpus):
        print(f"error: corpus folder {args.corpus} does not exist", file=sys.stderr)
        return 2
    meta = prepare(args.corpus, args.out, args.max_words, args.parts, args.seed)
    print(
        f"vocab_size={meta['vocab_size']} train_tokens={meta['train_tokens']} "
        f"heldout_tokens={meta['heldout_tokens']} into {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
