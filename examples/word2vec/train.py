"""Train word2vec (skip-gram, negative sampling) with train_from_dataset, in one process or on
parameter servers through fleetrun:

    python examples/word2vec/train.py --corpus ../shared/data/text_corpus --data w2v \\
        --max_words 1000000 --epochs 1                                  # one process
    fleetrun --server_num=1 --worker_num=2 examples/word2vec/train.py --data w2v \\
        --mode geo --update_frequency 100                                # GEO, 2 workers

``--corpus`` prepares ``--data`` first (corpus.py: vocabulary, training parts, held-out text)
unless it already holds a prepared corpus; under fleetrun the first process to take the folder's
lock prepares it and the others wait. The training parts are read through reader.py as the
dataset's pipe_command (subsampling, dynamic windows, unigram^0.75 negatives drawn afresh each
epoch); worker i of W trains on parts i, i+W, ... with ``--thread`` trainer threads.

At the end (worker 0 in a job) prints ``heldout_auc=``: the AUC of the true (centre, context)
pairs of the held-out text (the last 5 % of the corpus) against the same centres paired with
sampled negatives, scored by the trained model; then the 10 nearest neighbours (cosine of the
input embeddings) of a few frequent words, and ``words_per_sec=`` (training words over the
longest worker's training time, times the workers).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import corpus  # noqa: E402
import model  # noqa: E402
import reader  # noqa: E402
import training_curve  # noqa: E402

import fleet  # noqa: E402
from fleet.data_generator import python_pipe_command  # noqa: E402

MODES = ("single", "sync", "async", "half_async", "geo")
PROBE_WORDS = ("king", "god", "man", "war", "love", "day", "good", "father", "money", "house")


def roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Mann-Whitney AUC with mid-ranks for ties."""
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores), dtype=np.float64)
    sorted_scores = scores[order]
    start = np.flatnonzero(np.r_[True, sorted_scores[1:] != sorted_scores[:-1]])
    size = np.diff(np.r_[start, len(scores)])
    ranks[order] = np.repeat(start + (size + 1) / 2.0, size)
    pos = labels == 1
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def ensure_prepared(args: argparse.Namespace) -> dict:
    """The prepared corpus in --data, preparing it from --corpus under a file lock if absent."""
    if args.corpus is None:
        return corpus.load_meta(args.data)
    os.makedirs(args.data, exist_ok=True)
    with open(os.path.join(args.data, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return corpus.load_meta(args.data)
        except FileNotFoundError:
            start = time.perf_counter()
            meta = corpus.prepare(
                args.corpus, args.data, args.max_words, args.min_count, args.parts
            )
            print(f"prepared {args.data} in {time.perf_counter() - start:.1f}s: {meta}", flush=True)
            return meta


def training_files(args: argparse.Namespace, meta: dict) -> list[str]:
    """The prepared parts, or --train_files: the same parts in another form (MultiSlot samples
    drawn from them once, read with --pipe_command cat), one per part in the same order, so
    that the words per file stay those of the parts."""
    parts = [os.path.join(args.data, f) for f in meta["train_files"]]
    if not args.train_files:
        return parts
    if len(args.train_files) != len(parts):
        raise SystemExit(
            f"--train_files: {len(args.train_files)} files for the {len(parts)} training parts "
            f"of {args.data}; give one per part, in order"
        )
    missing = [f for f in args.train_files if not os.path.isfile(f)]
    if missing:
        raise SystemExit(f"--train_files: {missing[0]} does not exist")
    return list(args.train_files)


def strategy_for(args: argparse.Namespace) -> fleet.DistributedStrategy:
    return fleet.DistributedStrategyFactory.create(
        args.mode, args.update_frequency, send_queue_size=args.send_queue_size
    )


def make_dataset(net: model.SkipGram, files: list[str], args: argparse.Namespace):
    block = net.main.global_block()
    dataset = fleet.DatasetFactory().create_dataset("QueueDataset")
    dataset.set_use_var([block.var(name) for name in reader.SLOTS])
    dataset.set_pipe_command(
        args.pipe_command
        or python_pipe_command(
            os.path.join(HERE, "reader.py"),
            "--vocab",
            os.path.join(args.data, "vocab.txt"),
            "--window",
            args.window,
            "--negatives",
            args.negatives,
            "--sample",
            args.sample,
            "--seed",
            args.seed,
        )
    )
    dataset.set_batch_size(args.batch_size)
    dataset.set_thread(args.thread)
    dataset.set_filelist(files)
    return dataset


def heldout_pairs(
    data: str, counts: np.ndarray, window: int, negatives: int, sample: float, pairs: int
) -> tuple[np.ndarray, np.ndarray]:
    """(centre [N, 1], targets [N, 1 + negatives]) of `pairs` held-out (centre, context) pairs
    of the prepared corpus in `data`, with their negatives; the same for every run."""
    sampler = reader.Sampler(counts, window, negatives, sample, seed=12345)
    held = corpus.read_ids(os.path.join(data, "heldout.txt"))
    centre, context = sampler.pairs(sampler.subsample(held))
    pick = np.random.default_rng(7).permutation(len(centre))[:pairs]
    centre, context = centre[pick], context[pick]
    targets = np.concatenate([context[:, None], sampler.draw_negatives(context)], axis=1)
    return centre[:, None], targets


def heldout_auc(
    exe: fleet.Executor, net: model.SkipGram, args: argparse.Namespace, counts: np.ndarray
) -> float:
    """AUC of held-out (centre, context) pairs against (centre, negative) pairs."""
    centre, targets = heldout_pairs(
        args.data, counts, args.window, args.negatives, args.sample, args.heldout_pairs
    )
    logits = []
    for start in range(0, len(centre), 4096):
        stop = start + 4096
        (out,) = exe.run(
            net.test,
            feed={"centre": centre[start:stop], "targets": targets[start:stop]},
            fetch_list=[net.logits],
        )
        logits.append(out)
    scores = np.concatenate(logits)
    labels = np.zeros(scores.shape, dtype=np.int64)
    labels[:, 0] = 1
    return roc_auc(labels.ravel(), scores.ravel())


def input_vectors(exe: fleet.Executor, net: model.SkipGram, vocab_size: int) -> np.ndarray:
    vectors = []
    k = net.config.negatives
    for start in range(0, vocab_size, 4096):
        ids = np.arange(start, min(start + 4096, vocab_size), dtype=np.int64)[:, None]
        (out,) = exe.run(
            net.test,
            feed={"centre": ids, "targets": np.zeros((len(ids), 1 + k), np.int64)},
            fetch_list=[net.centre_vector],
        )
        vectors.append(out.reshape(len(ids), -1))
    return np.concatenate(vectors)


def print_neighbours(vectors: np.ndarray, words: list[str], probes: list[str]) -> None:
    norm = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    index = {w: i for i, w in enumerate(words)}
    for word in probes:
        similarity = norm @ norm[index[word]]
        similarity[index[word]] = -np.inf
        nearest = np.argsort(-similarity)[:10]
        print(
            f"neighbours of {word}: "
            + ", ".join(f"{words[i]} ({similarity[i]:.2f})" for i in nearest),
            flush=True,
        )


def train_epochs(
    exe: fleet.Executor,
    net: model.SkipGram,
    dataset,
    args: argparse.Namespace,
    expected_samples: int,
    curve: training_curve.Curve,
    worker: int,
    evaluate,
) -> tuple[int, float]:  # noqa: ANN001
    samples, seconds = 0, 0.0
    total = expected_samples * args.epochs
    for epoch in range(1, args.epochs + 1):
        on_line = training_curve.dataset_progress(
            curve, f"worker {worker} epoch {epoch}", args.batch_size, samples, total
        )
        result = exe.train_from_dataset(
            net.main,
            dataset,
            thread=args.thread,
            fetch_list=[net.loss],
            fetch_info=["loss"],
            print_period=args.print_period,
            print_fn=on_line,
        )
        samples += result.samples
        seconds += result.seconds
        print(
            f"worker {worker} epoch {epoch}: {result.samples} pairs in {result.seconds:.1f}s "
            f"({result.samples_per_sec:.0f} pairs/s), mean loss "
            f"{result.fetch_mean(net.loss.name):.4f}",
            flush=True,
        )
        if evaluate is not None:
            auc = evaluate()
            curve.log_epoch(epoch, auc)
            print(f"epoch {epoch}: heldout_auc={auc:.4f}", flush=True)
    return samples, seconds


def run(args: argparse.Namespace) -> int:
    distributed = args.mode != "single"
    if distributed:
        fleet.init()
    meta = ensure_prepared(args)
    words, counts = corpus.read_vocab(os.path.join(args.data, "vocab.txt"))
    cfg = model.ModelConfig(
        vocab_size=len(words),
        dim=args.dim,
        negatives=args.negatives,
        optimizer=args.optimizer,
        learning_rate=args.learning_rate,
        seed=args.seed,
    )
    wrap = (
        (lambda opt: fleet.distributed_optimizer(opt, strategy_for(args))) if distributed else None
    )
    net = model.build(cfg, wrap)
    if distributed and fleet.is_server():
        fleet.init_server()
        fleet.run_server()
        return 0
    worker, workers = (fleet.worker_index(), fleet.worker_num()) if distributed else (0, 1)
    files = training_files(args, meta)[worker::workers]
    if not files:
        raise SystemExit(
            f"worker {worker}: {len(meta['train_files'])} training parts for "
            f"{workers} workers; prepare at least one per worker (--parts)"
        )
    exe = fleet.Executor(fleet.CPUPlace())
    exe.run(net.startup)
    if distributed:
        fleet.init_worker()
    dataset = make_dataset(net, files, args)
    sampler = reader.Sampler(counts, args.window, args.negatives, args.sample)
    kept = float((counts * sampler.keep).sum() / counts.sum())
    my_words = meta["train_tokens"] * len(files) / len(meta["train_files"])
    expected = int(my_words * kept * (args.window + 1))  # mean pairs per kept word: window + 1
    curve = training_curve.Curve(
        f"word2vec skip-gram ({args.mode}, worker {worker})", test_metric_name="heldout_auc"
    )
    # Per-epoch held-out AUC only in one process: a job's worker 0 evaluates once at the end,
    # after every worker's updates reached the servers.
    evaluate = (lambda: heldout_auc(exe, net, args, counts)) if not distributed else None
    samples, seconds = train_epochs(exe, net, dataset, args, expected, curve, worker, evaluate)
    words_done = my_words * args.epochs
    print(f"worker {worker}: pairs={samples} words_per_sec={words_done / seconds:.0f}", flush=True)
    if distributed:
        fleet.flush_worker()
        total_words = fleet.util.all_reduce(np.array([words_done]), "sum")[0]
        longest = fleet.util.all_reduce(np.array([seconds]), "max")[0]
    else:
        total_words, longest = words_done, seconds
    if worker == 0:
        if distributed:
            fleet.flush_worker()
            curve.log_epoch(args.epochs, heldout_auc(exe, net, args, counts))
        auc = curve.test_metric[-1]
        print_neighbours(
            input_vectors(exe, net, len(words)),
            words,
            [w for w in PROBE_WORDS if w in set(words)][: args.probes],
        )
        print(
            f"total_words={total_words:.0f} words_per_sec={total_words / longest:.0f}", flush=True
        )
        print(f"heldout_auc={auc:.4f}", flush=True)
        if args.plot:
            curve.save(args.plot)
            print(f"wrote {args.plot}", flush=True)
    if distributed:
        fleet.stop_worker()
    return 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", required=True, help="prepared corpus folder (corpus.py)")
    parser.add_argument("--corpus", help="text folder to prepare --data from, if not prepared")
    parser.add_argument("--max_words", type=int, default=0, help="corpus tokens (0: all)")
    parser.add_argument("--min_count", type=int, default=5)
    parser.add_argument("--parts", type=int, default=4, help="training files when preparing")
    parser.add_argument(
        "--mode",
        choices=MODES,
        default="single",
        help="single: one process; else a fleetrun parameter-server mode",
    )
    parser.add_argument(
        "--train_files",
        nargs="+",
        help="instead of the prepared parts: one file per part, in order, in the form "
        "--pipe_command reads (e.g. reader.py's output saved once, with --pipe_command cat)",
    )
    parser.add_argument(
        "--pipe_command",
        help="the dataset's pipe_command (default: reader.py, drawing samples from the parts)",
    )
    parser.add_argument("--update_frequency", type=int, default=100, help="GEO: k steps")
    parser.add_argument(
        "--send_queue_size",
        type=int,
        default=1,  # as the other examples: fresher rows; measured no slower there
        help="async: gradients a table may have waiting before training waits",
    )
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--window", type=int, default=5)
    parser.add_argument("--negatives", type=int, default=5)
    parser.add_argument("--sample", type=float, default=1e-3, help="subsampling threshold")
    parser.add_argument("--batch_size", type=int, default=256)
    parser.add_argument("--thread", type=int, default=1, help="reader and trainer threads")
    parser.add_argument("--optimizer", choices=("sgd", "adagrad", "adam"), default="adagrad")
    parser.add_argument("--learning_rate", type=float, default=0.2)
    parser.add_argument("--heldout_pairs", type=int, default=20000)
    parser.add_argument("--probes", type=int, default=6, help="words whose neighbours print")
    parser.add_argument("--print_period", type=int, default=200, help="batches between logs")
    parser.add_argument("--plot", help="write the training curve to this PNG")
    parser.add_argument("--seed", type=int, default=1)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    return run(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
