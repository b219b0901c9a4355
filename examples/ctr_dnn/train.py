"""Train CTR-DNN on Criteo-format files in one process and report the test AUC.

    python examples/ctr_dnn/train.py --train train.txt --test test.txt --epochs 1

The last line printed is `test_auc=<value>`. Files are raw Criteo TSV (label, 13 integer and
26 hashed categorical fields); `generate_data.py` writes such files from a planted model.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import baselines  # noqa: E402
import criteo_reader  # noqa: E402
import model  # noqa: E402

import fleet  # noqa: E402


def evaluate(
    exe: fleet.Executor, net: model.CtrDnn, data: criteo_reader.CriteoArrays, batch_size: int = 4096
) -> np.ndarray:
    """Click probabilities [N] from the test program (no training ops)."""
    probs = []
    for batch in criteo_reader.iterate_batches(data, batch_size):
        (p,) = exe.run(
            net.test,
            feed=net.feed(batch.dense, batch.sparse, batch.label),
            fetch_list=[net.predict],
        )
        probs.append(p[:, 1])
    return np.concatenate(probs)


def train(args: argparse.Namespace) -> dict:
    start = time.perf_counter()
    train_data = criteo_reader.read_criteo(args.train, sparse_dim=args.sparse_dim)
    test_data = criteo_reader.read_criteo(args.test, sparse_dim=args.sparse_dim)
    print(
        f"read {len(train_data)} training and {len(test_data)} test rows in "
        f"{time.perf_counter() - start:.1f}s",
        flush=True,
    )
    cfg = model.ModelConfig(
        sparse_dim=args.sparse_dim,
        embedding_dim=args.embedding_dim,
        optimizer=args.optimizer,
        learning_rate=args.learning_rate,
        layout=args.layout,
        seed=args.seed,
    )
    net = model.build(cfg)
    exe = fleet.Executor(fleet.CPUPlace())
    exe.run(net.startup)
    if args.profile:
        exe.enable_profiling()

    step, samples, train_seconds, auc = 0, 0, 0.0, float("nan")
    for epoch in range(1, args.epochs + 1):
        window_start, window_samples = time.perf_counter(), 0
        epoch_start = window_start
        for batch in criteo_reader.iterate_batches(
            train_data, args.batch_size, shuffle=True, seed=args.seed + epoch
        ):
            feed = net.feed(batch.dense, batch.sparse, batch.label)
            loss, batch_auc = exe.run(net.main, feed=feed, fetch_list=[net.loss, net.auc])
            step += 1
            window_samples += len(batch)
            if step % args.print_period == 0:
                now = time.perf_counter()
                print(
                    f"epoch {epoch} step {step}: loss={loss[0]:.5f} train_auc={batch_auc[0]:.5f} "
                    f"{window_samples / (now - window_start):.0f} samples/s",
                    flush=True,
                )
                window_start, window_samples = now, 0
            samples += len(batch)
            if args.max_batches and step >= args.max_batches:
                break
        train_seconds += time.perf_counter() - epoch_start
        probs = evaluate(exe, net, test_data)
        auc = baselines.roc_auc(test_data.label[:, 0], probs)
        print(
            f"epoch {epoch} done: test_auc={auc:.5f} "
            f"({samples / train_seconds:.0f} samples/s so far)",
            flush=True,
        )
        if args.max_batches and step >= args.max_batches:
            break
    result = {
        "test_auc": auc,
        "epochs": epoch,
        "steps": step,
        "samples": samples,
        "train_seconds": train_seconds,
        "samples_per_sec": samples / train_seconds,
    }
    if args.profile:
        result["profile"] = exe.profile()
    return result


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The model and optimisation flags shared with train_dataset.py."""
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch_size", type=int, default=512)
    parser.add_argument(
        "--sparse_dim",
        type=int,
        default=criteo_reader.DEFAULT_SPARSE_DIM,
        help="size of the hashed id space (rows of the embedding table)",
    )
    parser.add_argument("--embedding_dim", type=int, default=10)
    parser.add_argument("--optimizer", choices=("adam", "adagrad"), default="adam")
    parser.add_argument("--learning_rate", type=float, default=1e-3)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--train", nargs="+", required=True, help="Criteo-format training files")
    parser.add_argument("--test", required=True, help="Criteo-format test file")
    add_model_arguments(parser)
    parser.add_argument(
        "--layout",
        choices=("slots", "fused"),
        default="slots",
        help="one input per slot (PaddleRec) or one [N,26] input (same math)",
    )
    parser.add_argument("--print_period", type=int, default=100, help="batches between logs")
    parser.add_argument("--max_batches", type=int, default=0, help="stop early (0 = no limit)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--profile",
        action="store_true",
        help="report time spent in forward, backward and optimizer ops",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON summary line")
    return parser.parse_args(argv)


def inputs_exist(paths: list[str]) -> bool:
    """False, after saying which on stderr, when an input file is missing."""
    for path in paths:
        if not os.path.isfile(path):
            print(f"error: input file {path} does not exist", file=sys.stderr)
            return False
    return True


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not inputs_exist(list(args.train) + [args.test]):
        return 2
    result = train(args)
    if args.json:
        print(json.dumps(result))
    print(f"test_auc={result['test_auc']:.5f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
