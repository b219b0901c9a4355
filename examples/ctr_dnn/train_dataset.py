"""Train CTR-DNN from raw Criteo files through a dataset and C++ trainer threads.

    python examples/ctr_dnn/train_dataset.py --train part-0 part-1 ... --test test.txt --thread 2

Every training file is piped through `criteo_reader.py` (a MultiSlotDataGenerator) by the
dataset's reader threads, one file per reader at a time, so give at least as many files as
threads. `--dataset inmemory` loads the files once and shuffles them in memory each epoch.
After training, the test file is scored exactly with the test program (`test_auc=`, the last
line) and once more through `infer_from_dataset`, whose streaming AUC op bins predictions into
4096 buckets (`stream_test_auc=`, close to the exact figure).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import baselines  # noqa: E402
import criteo_reader  # noqa: E402
import model  # noqa: E402
import train  # noqa: E402
import training_curve  # noqa: E402

import fleet  # noqa: E402
from fleet.data_generator import python_pipe_command  # noqa: E402

READER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "criteo_reader.py")


def make_dataset(kind: str, net: model.CtrDnn, files: list[str], args: argparse.Namespace):
    """A dataset feeding `net`'s inputs in criteo_reader.MULTISLOT_SLOTS order."""
    block = net.main.global_block()
    dataset = fleet.DatasetFactory().create_dataset(kind)
    dataset.set_use_var([block.var(name) for name in criteo_reader.MULTISLOT_SLOTS])
    # args.pipe_command (train_ps.py --pipe_command) replaces the reader, e.g. "cat" for files
    # already in MultiSlot form.
    pipe = getattr(args, "pipe_command", None)
    dataset.set_pipe_command(pipe or python_pipe_command(READER, "--sparse_dim", args.sparse_dim))
    dataset.set_batch_size(args.batch_size)
    dataset.set_thread(args.thread)
    dataset.set_filelist(files)
    if getattr(args, "feed_priority", None):  # else the library's default
        dataset.set_feed_priority(args.feed_priority)
    return dataset


def reset_streaming_auc(net: model.CtrDnn) -> None:
    """Zeroes the AUC op's persistable histograms, which training filled, so that the next
    pass measures only itself."""
    scope = fleet.global_scope()
    for var in net.main.global_block().vars.values():
        if var.persistable and "stat_" in var.name and "batch_" not in var.name:
            tensor = scope.find_var(var.name).get_tensor()
            tensor.set(np.zeros_like(tensor.numpy()))


def run(args: argparse.Namespace) -> dict:
    cfg = model.ModelConfig(
        sparse_dim=args.sparse_dim,
        embedding_dim=args.embedding_dim,
        optimizer=args.optimizer,
        learning_rate=args.learning_rate,
        seed=args.seed,
    )
    net = model.build(cfg)
    exe = fleet.Executor(fleet.CPUPlace())
    exe.run(net.startup)
    kind = "InMemoryDataset" if args.dataset == "inmemory" else "QueueDataset"
    dataset = make_dataset(kind, net, args.train, args)
    if kind == "InMemoryDataset":
        start = time.perf_counter()
        dataset.load_into_memory()
        print(
            f"loaded {dataset.get_memory_data_size()} samples in "
            f"{time.perf_counter() - start:.1f}s",
            flush=True,
        )
    samples, seconds = 0, 0.0
    curve = training_curve.Curve(f"CTR-DNN, train_from_dataset, {args.thread} threads")
    total = training_curve.count_lines(args.train) * args.epochs
    test_data = criteo_reader.read_criteo(args.test, sparse_dim=args.sparse_dim)
    for epoch in range(1, args.epochs + 1):
        if kind == "InMemoryDataset":
            dataset.local_shuffle(seed=args.seed + epoch)
        result = exe.train_from_dataset(
            net.main,
            dataset,
            thread=args.thread,
            fetch_list=[net.loss, net.auc],
            fetch_info=["loss", "train_auc"],
            print_period=args.print_period,
            print_fn=training_curve.dataset_progress(
                curve, f"epoch {epoch}", args.batch_size, samples, total
            ),
        )
        samples += result.samples
        seconds += result.seconds
        print(
            f"epoch {epoch}: {result.samples} samples in {result.seconds:.1f}s "
            f"({result.samples_per_sec:.0f} samples/s), mean loss "
            f"{result.fetch_mean(net.loss.name):.5f}",
            flush=True,
        )
        if args.plot and epoch < args.epochs:  # the last epoch is scored below
            probs = train.evaluate(exe, net, test_data)
            curve.log_epoch(epoch, baselines.roc_auc(test_data.label[:, 0], probs))
    auc = baselines.roc_auc(test_data.label[:, 0], train.evaluate(exe, net, test_data))
    curve.log_epoch(args.epochs, auc)
    if args.plot:
        curve.save(args.plot)
        print(f"wrote {args.plot}", flush=True)
    reset_streaming_auc(net)
    # One thread: the AUC histograms are shared by all threads of a pass, unsynchronised.
    # The test file is raw Criteo whatever --pipe_command the training files need.
    raw_reader = argparse.Namespace(**{**vars(args), "pipe_command": None})
    inferred = exe.infer_from_dataset(
        net.test,
        make_dataset("QueueDataset", net, [args.test], raw_reader),
        thread=1,
        fetch_list=[net.auc],
        print_period=0,
    )
    stream_auc = float(inferred.fetch[net.auc.name].reshape(-1)[0])
    return {
        "test_auc": auc,
        "stream_test_auc": stream_auc,
        "samples": samples,
        "samples_per_sec": samples / seconds if seconds else 0.0,
        "test_samples": inferred.samples,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--train", nargs="+", required=True, help="raw Criteo training files")
    parser.add_argument("--test", required=True, help="raw Criteo test file")
    parser.add_argument("--thread", type=int, default=2, help="reader and trainer threads")
    parser.add_argument(
        "--feed_priority",
        choices=("normal", "batch", "low", "idle"),
        help="--dataset: the feed threads' CPU priority (DatasetBase.set_feed_priority); "
        "default: the library's",
    )
    parser.add_argument("--dataset", choices=("queue", "inmemory"), default="queue")
    parser.add_argument(
        "--pipe_command",
        help='replaces the Criteo reader, e.g. "cat" for files already in MultiSlot form',
    )
    train.add_model_arguments(parser)
    parser.add_argument(
        "--print_period",
        type=int,
        default=100,
        help="batches (over all threads) between progress lines",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--plot", help="write the training curve to this PNG")
    parser.add_argument("--json", action="store_true", help="print a JSON summary line last")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not train.inputs_exist(list(args.train) + [args.test]):
        return 2
    result = run(args)
    print(f"stream_test_auc={result['stream_test_auc']:.5f}")
    print(f"test_auc={result['test_auc']:.5f}")
    if args.json:
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
