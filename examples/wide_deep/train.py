"""Train Wide & Deep on Criteo-format files, in one process or on parameter servers:

    python examples/wide_deep/train.py --train train.txt --test test.txt
    fleetrun --server_num=1 --worker_num=2 examples/wide_deep/train.py --mode async \\
        --train train.txt --test test.txt

Rows are read with examples/ctr_dnn's reader (the same features as CTR-DNN and its LR
baseline); the wide part crosses every pair of the 5 slots with the fewest distinct ids in the
training rows. In a job (--mode sync|async|half_async|geo) worker i trains on batches i, i+W, ...
(every worker the same number of full batches) and worker 0 evaluates the parameters held by the
servers at the end. Prints ``test_auc=`` last (one process: after every epoch too).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(os.path.dirname(HERE), "ctr_dnn"))
sys.path.insert(2, os.path.dirname(HERE))

import baselines  # noqa: E402
import criteo_reader  # noqa: E402
import model  # noqa: E402
import training_curve  # noqa: E402

import fleet  # noqa: E402

MODES = ("single", "sync", "async", "half_async", "geo")


def strategy_for(args: argparse.Namespace, table_optimizers: dict) -> fleet.DistributedStrategy:
    strategy = fleet.DistributedStrategyFactory.create(
        args.mode, args.update_frequency, send_queue_size=args.send_queue_size
    )
    strategy.table_optimizers = table_optimizers
    return strategy


def evaluate(exe: fleet.Executor, net: model.WideDeep, data: criteo_reader.CriteoArrays) -> float:
    probs = []
    for batch in criteo_reader.iterate_batches(data, 4096):
        (p,) = exe.run(
            net.test,
            feed=net.feed(batch.dense, batch.sparse, batch.label),
            fetch_list=[net.predict],
        )
        probs.append(p[:, 1])
    return baselines.roc_auc(data.label[:, 0], np.concatenate(probs))


def train_epoch(args, exe, net, data, epoch, worker, workers, curve, step):  # noqa: ANN001, ANN201
    """One epoch of this worker's share of the batches; returns (samples, step)."""
    per_worker = (len(data) // args.batch_size) // workers
    total = per_worker * args.batch_size * args.epochs
    batches = criteo_reader.iterate_batches(
        data, args.batch_size, shuffle=True, seed=args.seed + epoch
    )
    samples, window_start, window_samples = 0, time.perf_counter(), 0
    for i, batch in enumerate(batches):
        if i % workers != worker or i // workers >= per_worker:
            continue
        loss, auc = exe.run(
            net.main,
            feed=net.feed(batch.dense, batch.sparse, batch.label),
            fetch_list=[net.loss, net.auc],
        )
        step += 1
        samples += len(batch)
        window_samples += len(batch)
        if step % args.print_period == 0:
            now = time.perf_counter()
            rate = window_samples / (now - window_start)
            curve.log_step(step, float(loss[0]), rate, float(auc[0]))
            done = (epoch - 1) * per_worker * args.batch_size + samples
            print(
                f"worker {worker} epoch {epoch} "
                + training_curve.progress(step, rate, done, total)
                + f", loss {loss[0]:.5f}, train_auc {auc[0]:.5f}",
                flush=True,
            )
            window_start, window_samples = now, 0
    return samples, step


def run(args: argparse.Namespace) -> int:
    distributed = args.mode != "single"
    if distributed:
        fleet.init()
    train_data = criteo_reader.read_criteo(args.train, sparse_dim=args.sparse_dim)
    crosses = model.smallest_slots_crosses(train_data.sparse, args.cross_slots)
    cfg = model.ModelConfig(
        sparse_dim=args.sparse_dim,
        embedding_dim=args.embedding_dim,
        crosses=crosses,
        optimizer=args.optimizer,
        learning_rate=args.learning_rate,
        wide_optimizer=args.wide_optimizer,
        wide_learning_rate=args.wide_learning_rate,
        seed=args.seed,
    )
    wrap = (
        (lambda opt, own: fleet.distributed_optimizer(opt, strategy_for(args, own)))
        if distributed
        else None
    )
    net = model.build(cfg, wrap)
    if distributed and fleet.is_server():
        fleet.init_server()
        fleet.run_server()
        return 0
    worker, workers = (fleet.worker_index(), fleet.worker_num()) if distributed else (0, 1)
    print(f"worker {worker}: crosses of slots {crosses}", flush=True)
    exe = fleet.Executor(fleet.CPUPlace())
    exe.run(net.startup)
    if distributed:
        fleet.init_worker()
    test_data = criteo_reader.read_criteo([args.test], sparse_dim=args.sparse_dim)
    curve = training_curve.Curve(f"Wide & Deep ({args.mode}, worker {worker})")
    samples, step, start = 0, 0, time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        done, step = train_epoch(args, exe, net, train_data, epoch, worker, workers, curve, step)
        samples += done
        if not distributed:
            curve.log_epoch(epoch, evaluate(exe, net, test_data))
            print(f"epoch {epoch}: test_auc={curve.test_metric[-1]:.5f}", flush=True)
    seconds = time.perf_counter() - start
    print(f"worker {worker}: samples={samples} samples_per_sec={samples / seconds:.0f}", flush=True)
    if distributed:
        fleet.flush_worker()
        total = fleet.util.all_reduce(np.array([samples], dtype=np.float64), "sum")[0]
        longest = fleet.util.all_reduce(np.array([seconds]), "max")[0]
    else:
        total, longest = samples, seconds
    if worker == 0:
        if distributed:
            fleet.flush_worker()
            curve.log_epoch(args.epochs, evaluate(exe, net, test_data))
        print(f"total_samples={total:.0f} total_samples_per_sec={total / longest:.0f}", flush=True)
        print(f"test_auc={curve.test_metric[-1]:.5f}", flush=True)
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
    parser.add_argument("--train", nargs="+", required=True, help="Criteo-format training files")
    parser.add_argument("--test", required=True, help="Criteo-format test file")
    parser.add_argument(
        "--mode",
        choices=MODES,
        default="single",
        help="single: one process; else a fleetrun parameter-server mode",
    )
    parser.add_argument("--update_frequency", type=int, default=10, help="GEO: k steps")
    parser.add_argument(
        "--send_queue_size",
        type=int,
        default=1,  # as examples/ctr_dnn/train_ps.py: staler gradients with more, no faster
        help="async: gradients a table may have waiting before training waits",
    )
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch_size", type=int, default=512)
    parser.add_argument("--sparse_dim", type=int, default=criteo_reader.DEFAULT_SPARSE_DIM)
    parser.add_argument("--embedding_dim", type=int, default=10)
    parser.add_argument(
        "--cross_slots",
        type=int,
        default=5,
        help="cross every pair of this many lowest-cardinality slots",
    )
    parser.add_argument("--optimizer", choices=("adagrad", "adam"), default="adagrad")
    parser.add_argument("--learning_rate", type=float, default=0.02)
    parser.add_argument(
        "--wide_optimizer",
        choices=("adagrad", "adam", "same"),
        default="adagrad",
        help="the wide weights' own optimizer (a rule of their own on the servers); "
        "same: --optimizer and --learning_rate",
    )
    parser.add_argument("--wide_learning_rate", type=float, default=0.02)
    parser.add_argument("--print_period", type=int, default=100, help="batches between logs")
    parser.add_argument("--plot", help="write the training curve to this PNG")
    parser.add_argument("--seed", type=int, default=1)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for path in list(args.train) + [args.test]:
        if not os.path.isfile(path):
            print(f"error: input file {path} does not exist", file=sys.stderr)
            return 2
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
