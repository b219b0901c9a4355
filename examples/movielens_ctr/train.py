"""Click-through prediction on MovieLens-100k ratings (label: rating >= 4) with a DeepFM trained
by C++ trainer threads from files piped through a MultiSlotDataGenerator reader.

    python examples/movielens_ctr/train.py                    # splits u.data.head80000 80/20
    python examples/movielens_ctr/train.py --train A --test B # your own u.data-format files

Also trains a logistic regression over one-hot user and item ids on the same split (the usual
baseline: per-user and per-item bias). Prints `lr_test_auc=` and, last, `test_auc=`.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# After HERE: ctr_dnn has a model.py too; only its baselines (roc_auc) are used.
sys.path.append(os.path.join(HERE, "..", "ctr_dnn"))

import baselines  # noqa: E402
import model  # noqa: E402
import reader  # noqa: E402

import fleet  # noqa: E402
from fleet.data_generator import python_pipe_command  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_DATA_DIR = os.path.join(
    os.environ.get("FLEET_SHARED_DATA", os.path.join(os.path.dirname(ROOT), "shared", "data")),
    "movielens",
    "ml-100k",
)


def split_ratings(data_dir: str, out_dir: str, parts: int, seed: int) -> tuple[list[str], str]:
    """Writes a seeded 80/20 random split of u.data.head80000: `parts` train files and one test
    file (u.data format)."""
    with open(os.path.join(data_dir, "u.data.head80000"), encoding="ascii") as f:
        lines = [line for line in f if line.strip()]
    order = np.random.default_rng(seed).permutation(len(lines))
    cut = len(lines) * 4 // 5
    train_files = []
    for p in range(parts):
        path = os.path.join(out_dir, f"train-{p}.txt")
        with open(path, "w", encoding="ascii") as f:
            f.writelines(lines[i] for i in order[p:cut:parts])
        train_files.append(path)
    test_file = os.path.join(out_dir, "test.txt")
    with open(test_file, "w", encoding="ascii") as f:
        f.writelines(lines[i] for i in order[cut:])
    return train_files, test_file


def feed_of(samples: list) -> dict:
    """A feed dict for a batch of reader samples: one LoD tensor per id slot, and the labels."""
    feed = {}
    for k, name in enumerate(reader.ID_SLOTS):
        ids = [s[k][1] for s in samples]
        values = np.fromiter((i for row in ids for i in row), np.int64).reshape(-1, 1)
        feed[name] = fleet.LoDTensor(values, lengths=[[len(row) for row in ids]])
    feed["label"] = np.array([s[-1][1] for s in samples], np.int64).reshape(-1, 1)
    return feed


def predict(exe: fleet.Executor, net: model.DeepFm, samples: list, batch: int = 4096):
    probs = []
    for start in range(0, len(samples), batch):
        (p,) = exe.run(
            net.test, feed=feed_of(samples[start : start + batch]), fetch_list=[net.predict]
        )
        probs.append(p[:, 1])
    return np.concatenate(probs)


def logistic_regression_auc(train: list, test: list, steps: int = 300, l2: float = 1e-5) -> float:
    """Test AUC of a logistic regression over one-hot user and item ids (full-batch Adam)."""

    def columns(samples):
        user = np.array([s[0][1][0] for s in samples])
        item = np.array([s[1][1][0] for s in samples])
        label = np.array([s[-1][1][0] for s in samples], np.float64)
        return user, item, label

    user, item, label = columns(train)
    w = np.zeros(reader.VOCAB_SIZE + 1)  # last entry: the bias
    m, v = np.zeros_like(w), np.zeros_like(w)
    for t in range(1, steps + 1):
        p = 1.0 / (1.0 + np.exp(-(w[user] + w[item] + w[-1])))
        err = (p - label) / label.size
        grad = np.bincount(user, err, w.size) + np.bincount(item, err, w.size) + l2 * w
        grad[-1] = err.sum()
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad * grad
        w -= 0.05 * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    user, item, label = columns(test)
    return baselines.roc_auc(label, w[user] + w[item])


def train(args: argparse.Namespace, train_files: list[str], test_file: str) -> dict:
    tables = reader.Tables(args.data_dir)
    net = model.build(model.ModelConfig(learning_rate=args.learning_rate, seed=args.seed))
    exe = fleet.Executor(fleet.CPUPlace())
    exe.run(net.startup)
    dataset = fleet.DatasetFactory().create_dataset("QueueDataset")
    block = net.main.global_block()
    dataset.set_use_var([block.var(name) for name in reader.SLOTS])
    dataset.set_pipe_command(
        python_pipe_command(os.path.join(HERE, "reader.py"), "--data_dir", args.data_dir)
    )
    dataset.set_batch_size(args.batch_size)
    dataset.set_thread(args.thread)
    dataset.set_filelist(train_files)
    test = list(reader.read_samples(test_file, tables))
    labels = np.array([s[-1][1][0] for s in test])
    auc = float("nan")
    for epoch in range(1, args.epochs + 1):
        result = exe.train_from_dataset(
            net.main,
            dataset,
            thread=args.thread,
            fetch_list=[net.loss],
            fetch_info=["loss"],
            print_period=args.print_period,
        )
        auc = baselines.roc_auc(labels, predict(exe, net, test))
        print(
            f"epoch {epoch}: {result.samples} samples, {result.samples_per_sec:.0f} "
            f"samples/s, mean loss {result.fetch_mean(net.loss.name):.4f}, test AUC {auc:.4f}",
            flush=True,
        )
    train_samples = [s for path in train_files for s in reader.read_samples(path, tables)]
    return {"test_auc": auc, "lr_test_auc": logistic_regression_auc(train_samples, test)}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--train", nargs="+", help="u.data-format training files")
    parser.add_argument("--test", help="u.data-format test file (with --train)")
    parser.add_argument(
        "--data_dir",
        default=DEFAULT_DATA_DIR,
        help="ml-100k folder with u.user, u.item (and u.data.head80000)",
    )
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--thread", type=int, default=2, help="reader and trainer threads")
    parser.add_argument("--batch_size", type=int, default=256)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument(
        "--print_period", type=int, default=0, help="batches between progress lines (0: none)"
    )
    parser.add_argument("--seed", type=int, default=1, help="split and initialisation seed")
    args = parser.parse_args(argv)
    if bool(args.train) != bool(args.test):
        parser.error("--train and --test go together")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for name in ("u.user", "u.item") + (() if args.train else ("u.data.head80000",)):
        if not os.path.isfile(os.path.join(args.data_dir, name)):
            print(f"error: {name} not found in {args.data_dir} (set --data_dir)", file=sys.stderr)
            return 2
    with tempfile.TemporaryDirectory(prefix="movielens_") as tmp:
        if args.train:
            train_files, test_file = args.train, args.test
        else:
            train_files, test_file = split_ratings(args.data_dir, tmp, args.thread, args.seed)
        result = train(args, train_files, test_file)
    print(f"lr_test_auc={result['lr_test_auc']:.5f}")
    print(f"test_auc={result['test_auc']:.5f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
