"""Prepares the big corpus of config_bigdata.yaml in PaddleRec's layout (train/, test/, dict/):
the shared text corpus tokenised, its vocabulary (words seen 5 times or more, ids by decreasing
count) and the word-id files, made by examples/word2vec/corpus.py (the last 5 % of the text is
held out as test/).

    python models/recall/word2vec/data/prepare_bigdata.py \\
        [--corpus ../shared/data/text_corpus] [--out .cache/word2vec/text_corpus]

Prints the vocabulary size: config_bigdata.yaml's sparse_feature_number is the one of the whole
corpus (20235); with --max_words the vocabulary is smaller, set sparse_feature_number to it."""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.normpath(os.path.join(HERE, "..", "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO_ROOT, "examples", "word2vec"))

import corpus  # noqa: E402


def prepare(corpus_dir, out, max_words=0, parts=4):
    """corpus.py's files moved into train/ (the parts), test/ (held out) and dict/ (counts);
    returns corpus.py's meta (vocab_size, tokens)."""
    raw = os.path.join(out, "prepared")
    meta = corpus.prepare(corpus_dir, raw, max_words, 5, parts, 0.05)
    for folder in ("train", "test", "dict"):
        os.makedirs(os.path.join(out, folder), exist_ok=True)
    for name in meta["train_files"]:
        os.replace(os.path.join(raw, name), os.path.join(out, "train", name))
    os.replace(os.path.join(raw, "heldout.txt"), os.path.join(out, "test", "heldout.txt"))
    os.replace(os.path.join(raw, "vocab.txt"), os.path.join(out, "dict", "word_count_dict.txt"))
    os.remove(os.path.join(raw, "meta.json"))
    os.rmdir(raw)
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
    args = parser.parse_args()
    if not os.path.isdir(args.corpus):
        print(f"error: corpus folder {args.corpus} does not exist", file=sys.stderr)
        return 2
    meta = prepare(args.corpus, args.out, args.max_words, args.parts)
    print(f"vocab_size={meta['vocab_size']} train_tokens={meta['train_tokens']} into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
