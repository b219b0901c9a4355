"""Train CTR-DNN on parameter servers, launched by fleetrun:

    fleetrun --server_num=2 --worker_num=2 examples/ctr_dnn/train_ps.py \\
        --mode async --train train.txt --test test.txt

The embedding table (is_sparse) lives on the servers as a sparse table keyed by the raw ids; the
dense parameters live there too, in one dense table. --mode picks sync, async, half_async or geo
(--update_frequency: GEO's k steps). Worker i trains on batches i, i+W, i+2W, ... of the
training files; at the end worker 0 evaluates the trained model (parameters from the servers)
on the test file and prints `test_auc=` and every worker its samples/s.
"""

from __future__ import annotations

import argparse
import sys
import time
import os

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import baselines  # noqa: E402
import criteo_reader  # noqa: E402
import model  # noqa: E402
import train  # noqa: E402

import fleet  # noqa: E402

MODES = ("sync", "async", "half_async", "geo")


def strategy_for(mode: str, update_frequency: int) -> fleet.DistributedStrategy:
    factory = fleet.DistributedStrategyFactory
    return {"sync": factory.create_sync_strategy, "async": factory.create_async_strategy,
            "half_async": factory.create_half_async_strategy,
            "geo": lambda: factory.create_geo_strategy(update_frequency)}[mode]()


def run(args: argparse.Namespace) -> int:
    fleet.init()
    cfg = model.ModelConfig(sparse_dim=args.sparse_dim, embedding_dim=args.embedding_dim,
                            optimizer=args.optimizer, learning_rate=args.learning_rate,
                            seed=args.seed)
    strategy = strategy_for(args.mode, args.update_frequency)
    net = model.build(cfg, lambda opt: fleet.distributed_optimizer(opt, strategy))
    if fleet.is_server():
        fleet.init_server()
        fleet.run_server()
        return 0
    worker, workers = fleet.worker_index(), fleet.worker_num()
    train_data = criteo_reader.read_criteo(args.train, sparse_dim=args.sparse_dim)
    exe = fleet.Executor(fleet.CPUPlace())
    exe.run(net.startup)
    fleet.init_worker()
    start = time.perf_counter()
    samples, step = 0, 0
    window_start, window_samples = start, 0
    for epoch in range(1, args.epochs + 1):
        batches = criteo_reader.iterate_batches(train_data, args.batch_size, shuffle=True,
                                                seed=args.seed + epoch)
        for i, batch in enumerate(batches):
            if i % workers != worker:
                continue
            # Sync mode needs the same number of steps on every worker.
            if args.mode == "sync" and len(batch) < args.batch_size:
                continue
            loss, _ = exe.run(net.main, feed=net.feed(batch.dense, batch.sparse, batch.label),
                              fetch_list=[net.loss, net.auc])
            step += 1
            samples += len(batch)
            window_samples += len(batch)
            if step % args.print_period == 0:
                now = time.perf_counter()
                print(f"worker {worker} epoch {epoch} step {step}: loss={loss[0]:.5f} "
                      f"{window_samples / (now - window_start):.0f} samples/s", flush=True)
                window_start, window_samples = now, 0
            if args.max_batches and step >= args.max_batches:
                break
    seconds = time.perf_counter() - start
    fleet.flush_worker()
    print(f"worker {worker}: samples={samples} samples_per_sec={samples / seconds:.0f}",
          flush=True)
    fleet.barrier_worker()  # every worker's gradients are on the servers
    if worker == 0:
        fleet.flush_worker()  # refresh the dense parameters after the others' last pushes
        test_data = criteo_reader.read_criteo([args.test], sparse_dim=args.sparse_dim)
        probs = train.evaluate(exe, net, test_data)
        auc = baselines.roc_auc(test_data.label[:, 0], probs)
        print(f"total_samples_per_sec={samples * workers / seconds:.0f} (estimate: worker 0's "
              f"rate x {workers})", flush=True)
        print(f"test_auc={auc:.5f}", flush=True)
    fleet.stop_worker()
    return 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", nargs="+", required=True, help="Criteo-format training files")
    parser.add_argument("--test", required=True, help="Criteo-format test file")
    train.add_model_arguments(parser)
    parser.add_argument("--mode", choices=MODES, default="async")
    parser.add_argument("--update_frequency", type=int, default=10, help="GEO: k steps")
    parser.add_argument("--print_period", type=int, default=100, help="steps between logs")
    parser.add_argument("--max_batches", type=int, default=0, help="stop early (0 = no limit)")
    parser.add_argument("--seed", type=int, default=1)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not train.inputs_exist(list(args.train) + [args.test]):
        return 2
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
