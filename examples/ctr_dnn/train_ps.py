"""Train CTR-DNN on parameter servers, launched by fleetrun:

    fleetrun --server_num=2 --worker_num=2 examples/ctr_dnn/train_ps.py \\
        --mode async --train train.txt --test test.txt

The embedding table (is_sparse) lives on the servers as a sparse table keyed by the raw ids; the
dense parameters live there too, in one dense table. --mode picks sync, async, half_async or geo
(--update_frequency: GEO's k steps). Two drivers:

* the Executor.run loop (default): worker i trains on batches i, i+W, i+2W, ... of the
  training files, read by NumPy;
* --dataset queue|inmemory: train_from_dataset with --thread C++ trainer threads, worker i
  reading training files i, i+W, ... through criteo_reader.py as a pipe_command (give at least
  W files: generate_data.py --train_parts).

At the end every worker evaluates its share of the test file (parameters from the servers) and
the job's AUC is computed from the AUC op's histograms summed over the workers
(fleet.metrics.auc): worker 0 prints `test_auc=` (that global AUC) and `pooled_auc=` (the AUC
of every worker's predictions gathered in one place, by the same histogram: they agree); every
worker prints its samples/s and worker 0 the job's total.

Jobs that last (the online-training loop): --save_dir saves the servers' tables and the
workers' own persistables with fleet.save_persistables after each epoch ("day"); --resume DIR
starts the servers from a checkpoint (fleet.init_server(DIR)). With --days D the training files
are D daily file sets (file i belongs to day i % D): day 1 ends with a base save, every later
day with a delta save of the rows changed that day.
"""

from __future__ import annotations

import argparse
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
import train_dataset  # noqa: E402
import training_curve  # noqa: E402

import fleet  # noqa: E402

MODES = ("sync", "async", "half_async", "geo")


def strategy_for(args: argparse.Namespace) -> fleet.DistributedStrategy:
    configs = {"send_queue_size": args.send_queue_size}
    if args.max_dense_staleness is not None:
        configs["max_dense_staleness"] = args.max_dense_staleness
    if args.no_prefetch:
        configs["prefetch_sparse"] = False
    if args.local_transport is not None:
        configs["local_transport"] = args.local_transport
    strategy = fleet.DistributedStrategyFactory.create(args.mode, args.update_frequency, **configs)
    if args.ssd_path:
        strategy.sparse_table_configs = {
            "storage": "ssd",
            "memory_budget_mb": args.ssd_budget_mb,
            "ssd_path": args.ssd_path,
        }
    return strategy


def _train_epoch(
    args: argparse.Namespace,
    exe: fleet.Executor,
    net: model.CtrDnn,
    epoch: int,
    samples: int,
    step: int,
    worker: int,
    workers: int,
    curve: training_curve.Curve | None = None,
) -> tuple[int, int]:
    """One epoch of the Executor.run loop on this worker's share of the batches."""
    train_data = _train_data(args)
    window_start, window_samples = time.perf_counter(), 0
    batches = criteo_reader.iterate_batches(
        train_data, args.batch_size, shuffle=True, seed=args.seed + epoch
    )
    # Every worker runs the same number of steps (sync mode's step barrier needs it): the full
    # batches, dealt round-robin, the remainder dropped.
    per_worker = (len(train_data) // args.batch_size) // workers
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
            total = per_worker * args.batch_size * args.epochs
            if curve is not None:
                curve.log_step(step, loss[0], rate, auc[0])
            line = training_curve.progress(step, rate, samples, total)
            print(
                f"worker {worker} epoch {epoch} {line}: loss={loss[0]:.5f} train_auc={auc[0]:.5f}",
                flush=True,
            )
            window_start, window_samples = now, 0
        if args.max_batches and step >= args.max_batches:
            break
    return samples, step


_TRAIN_DATA: dict = {}


def _train_data(args: argparse.Namespace) -> criteo_reader.CriteoArrays:
    if "data" not in _TRAIN_DATA:
        _TRAIN_DATA["data"] = criteo_reader.read_criteo(args.train, sparse_dim=args.sparse_dim)
    return _TRAIN_DATA["data"]


def run(args: argparse.Namespace) -> int:
    fleet.init()
    cfg = model.ModelConfig(
        sparse_dim=args.sparse_dim,
        embedding_dim=args.embedding_dim,
        optimizer=args.optimizer,
        learning_rate=args.learning_rate,
        seed=args.seed,
    )
    strategy = strategy_for(args)
    net = model.build(cfg, lambda opt: fleet.distributed_optimizer(opt, strategy))
    if fleet.is_server():
        # A job fleetrun --max_restarts restarted resumes from its latest complete save.
        fleet.init_server(args.resume or fleet.restart_checkpoint())
        fleet.run_server()
        return 0
    worker, workers = fleet.worker_index(), fleet.worker_num()
    exe = fleet.Executor(fleet.CPUPlace())
    exe.run(net.startup)
    if args.dataset:
        files = list(args.train)[worker::workers]
        if not files:
            raise SystemExit(
                f"worker {worker}: {len(args.train)} training files for {workers} "
                "workers; give at least one per worker "
                "(generate_data.py --train_parts)"
            )
        dataset = train_dataset.make_dataset(
            "InMemoryDataset" if args.dataset == "inmemory" else "QueueDataset", net, files, args
        )
        if args.dataset == "inmemory":
            dataset.load_into_memory()
    fleet.init_worker()
    start = time.perf_counter()
    samples, step = 0, 0
    curve = training_curve.Curve(
        f"CTR-DNN, {args.mode} parameter servers, worker {worker}",
        test_metric_name="test AUC, all workers",
    )
    days = args.days or args.epochs
    all_train = list(args.train)
    for epoch in range(1, days + 1):
        if args.days:
            args.train = all_train[epoch - 1 :: args.days] or all_train
            _TRAIN_DATA.clear()
        if args.dataset:
            if args.dataset == "inmemory":
                dataset.local_shuffle(seed=args.seed + epoch)
            result = exe.train_from_dataset(
                net.main,
                dataset,
                thread=args.thread,
                fetch_list=[net.loss, net.auc],
                fetch_info=["loss", "train_auc"],
                print_period=args.print_period,
                print_fn=training_curve.dataset_progress(
                    curve, f"worker {worker} epoch {epoch}", args.batch_size
                ),
            )
            samples += result.samples
        else:
            samples, step = _train_epoch(
                args, exe, net, epoch, samples, step, worker, workers, curve
            )
        if args.save_dir:
            # Day 1 (or every epoch without --days): a base save; later days: the day's delta.
            # A save is the first worker's own call; for a checkpoint that holds every worker's
            # whole day and nothing of the next, all flush and meet before it and after it.
            mode = 1 if args.days and epoch > 1 else 0
            fleet.flush_worker()
            fleet.barrier_worker()
            if fleet.is_first_worker():
                fleet.save_persistables(exe, args.save_dir, net.main, mode=mode)
            fleet.barrier_worker()
            if worker == 0:
                print(
                    f"saved {'delta' if mode else 'base'} checkpoint of day {epoch} into "
                    f"{args.save_dir}",
                    flush=True,
                )
        if epoch < days:  # the last epoch is evaluated below, with the job's totals
            eval_start = time.perf_counter()
            fleet.flush_worker()
            epoch_auc, _ = evaluate_share(exe, net, args, worker, workers)
            start += time.perf_counter() - eval_start  # samples/s counts training time only
            curve.log_epoch(epoch, epoch_auc)
            if worker == 0:
                print(f"epoch {epoch}: test_auc={epoch_auc:.6f} (all workers)", flush=True)
    seconds = time.perf_counter() - start
    fleet.flush_worker()
    print(f"worker {worker}: samples={samples} samples_per_sec={samples / seconds:.0f}", flush=True)
    # Over every worker (this also waits until every worker's gradients are on the servers).
    total = fleet.util.all_reduce(np.array([samples], dtype=np.float64), "sum")[0]
    longest = fleet.util.all_reduce(np.array([seconds]), "max")[0]
    fleet.flush_worker()  # refresh the dense parameters after the others' last pushes
    auc, pooled = evaluate_share(exe, net, args, worker, workers)
    if worker == 0:
        print(f"total_samples={total:.0f} total_samples_per_sec={total / longest:.0f}", flush=True)
        print(f"test_auc={auc:.6f}", flush=True)
        print(f"pooled_auc={pooled:.6f}", flush=True)
        if args.plot:
            curve.log_epoch(days, auc)
            curve.save(args.plot)
            print(f"wrote {args.plot}", flush=True)
    fleet.stop_worker()
    return 0


def evaluate_share(
    exe: fleet.Executor, net: model.CtrDnn, args: argparse.Namespace, worker: int, workers: int
) -> tuple[float, float]:
    """Evaluates this worker's share of the test file (every worker the same number of steps:
    a sync job's steps meet) and returns the job's AUC by fleet.metrics.auc over the workers'
    AUC histograms, and, to check it, the AUC of every worker's predictions gathered."""
    test_data = criteo_reader.read_criteo([args.test], sparse_dim=args.sparse_dim)
    share = test_data.take(slice(worker, None, workers))
    steps = max(1, -(-((len(test_data) + workers - 1) // workers) // args.eval_batch_size))
    auc_op = next(
        op
        for op in net.test.global_block().ops
        if op.type == "auc" and net.test.global_block().var(op.input("StatPos")[0]).persistable
    )
    stat_pos, stat_neg = auc_op.input("StatPos")[0], auc_op.input("StatNeg")[0]
    scope = fleet.global_scope()
    for name in (stat_pos, stat_neg):  # training accumulated into them too: test data only
        tensor = scope.find_var(name).get_tensor()
        tensor.set(np.zeros_like(tensor.numpy()))
    probs = []
    for piece in np.array_split(np.arange(len(share)), steps):
        batch = share.take(piece)
        (p,) = exe.run(
            net.test,
            feed=net.feed(batch.dense, batch.sparse, batch.label),
            fetch_list=[net.predict],
        )
        probs.append(p[:, 1])
    auc = fleet.metrics.auc(stat_pos, stat_neg)
    gathered = fleet.util.all_gather(np.concatenate(probs))
    labels = [test_data.take(slice(w, None, workers)).label[:, 0] for w in range(workers)]
    pooled = baselines.histogram_auc(np.concatenate(gathered), np.concatenate(labels))
    return auc, pooled


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--train", nargs="+", required=True, help="Criteo-format training files")
    parser.add_argument("--test", required=True, help="Criteo-format test file")
    train.add_model_arguments(parser)
    parser.add_argument("--mode", choices=MODES, default="async")
    parser.add_argument(
        "--dataset",
        choices=("queue", "inmemory"),
        help="train with train_from_dataset (else the Executor.run loop)",
    )
    parser.add_argument("--thread", type=int, default=1, help="trainer threads (--dataset)")
    parser.add_argument(
        "--feed_priority",
        choices=("normal", "batch", "low", "idle"),
        help="--dataset: the feed threads' CPU priority (DatasetBase.set_feed_priority); "
        "default: the library's",
    )
    parser.add_argument(
        "--pipe_command",
        help="--dataset: the command each training file is piped through, instead of "
        "criteo_reader.py (e.g. cat, for files already in MultiSlot form)",
    )
    parser.add_argument("--update_frequency", type=int, default=10, help="GEO: k steps")
    parser.add_argument(
        "--send_queue_size",
        type=int,
        # 1: measured 0.754-0.756 test AUC at 26-28k samples/s on the main job, against
        # 0.740-0.760 with 4 (staler gradients, no faster).
        default=1,
        help="async: gradients a variable may have in flight before training "
        "waits (more: faster, staler)",
    )
    parser.add_argument(
        "--max_dense_staleness",
        type=int,
        default=None,
        help="async: own steps the dense parameters may lag behind before training waits "
        "for their refresh (-1: no bound; default: the library's, 0)",
    )
    parser.add_argument(
        "--no_prefetch",
        action="store_true",
        help="async --dataset: pull each batch's sparse rows at its step instead of "
        "while the batch before ends (slower; the same AUC within the noise)",
    )
    parser.add_argument(
        "--local_transport",
        nargs="?",
        const="unix",
        default=None,
        choices=("off", "unix", "shm"),
        help="how workers reach the servers of their own host (a_sync_configs['local_transport']):"
        " 'unix' (the flag alone), the servers' Unix-domain sockets; 'shm' (the strategy's "
        "default), the dense floats through shared memory; 'off', loopback TCP",
    )
    parser.add_argument(
        "--ssd_path",
        help="keep the embedding table on the SSD tier: its RocksDB databases go under this "
        "directory, the hot rows in --ssd_budget_mb MiB of each server's memory",
    )
    parser.add_argument("--ssd_budget_mb", type=float, default=64.0)
    parser.add_argument(
        "--eval_batch_size",
        type=int,
        default=4096,
        help="test rows a step of the evaluation (the AUC does not depend on it; an SSD table "
        "whose budget cannot hold a step's rows refuses it)",
    )
    parser.add_argument("--print_period", type=int, default=100, help="steps between logs")
    parser.add_argument("--max_batches", type=int, default=0, help="stop early (0 = no limit)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--plot", help="worker 0 writes its training curve to this PNG")
    parser.add_argument("--save_dir", help="save a checkpoint here after each epoch / day")
    parser.add_argument("--resume", help="start the servers from this checkpoint directory")
    parser.add_argument(
        "--days",
        type=int,
        default=0,
        help="online training: the training files are this many daily sets (file i is day "
        "i %% days); base save after day 1, delta saves after the others (with --save_dir)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not train.inputs_exist(list(args.train) + [args.test]):
        return 2
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
