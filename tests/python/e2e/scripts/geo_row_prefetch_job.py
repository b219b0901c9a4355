"""A GEO worker (or server) under fleetrun that trains with train_from_dataset, for
test_geo_row_prefetch_job.py: each sample has a signal id whose parity is its label and two ids new
to the job, so every batch brings rows the worker has not pulled yet (what GEO's next-batch row
prefetch pulls ahead). Worker i reads --data_dir/part-i. After the passes every worker prints one
JSON line: its passes' mean losses, its prefetch counts and, for worker 0, how many of the job's ids
the servers hold a trained (non-zero) row for."""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

import numpy as np

import fleet
from fleet import fleet_api, layers

DIM = 4


def write_part(path: pathlib.Path, worker: int, lines: int, signals: int) -> np.ndarray:
    """Worker `worker`'s samples; returns every id they hold."""
    rng = np.random.default_rng(worker)
    signal = rng.integers(0, signals, size=lines)
    # Two ids no other line (of any worker) holds: a new row in every sample.
    fresh = 1_000_000 * (worker + 1) + 2 * np.arange(lines)
    with open(path, "w") as f:
        for s, n in zip(signal, fresh):
            f.write(f"3 {s} {n} {n + 1} 1 {s % 2}\n")
    return np.concatenate([signal, fresh, fresh + 1])


def build():
    main, startup = fleet.Program(), fleet.Program()
    main.random_seed = startup.random_seed = 7
    with fleet.program_guard(main, startup):
        ids = layers.data("ids", [1], dtype="int64", lod_level=1)
        label = layers.data("label", [1], dtype="int64")
        emb = layers.embedding(
            ids,
            size=[10, DIM],
            is_sparse=True,
            param_attr=fleet.ParamAttr(name="emb", initializer=fleet.initializer.Constant(0.0)),
        )
        pooled = layers.sequence_pool(emb, "sum")
        prob = layers.fc(pooled, 2, act="softmax")
        loss = layers.mean(layers.cross_entropy(prob, label))
    return main, startup, ids, label, loss


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data_dir", required=True)
    parser.add_argument("--lines", type=int, default=2048)
    parser.add_argument("--signals", type=int, default=64)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--geo_steps", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1, help="trainer threads per worker")
    parser.add_argument("--no_prefetch", action="store_true")
    args = parser.parse_args()
    main_prog, startup, ids, label, loss = build()
    fleet.init()
    strategy = fleet.DistributedStrategyFactory.create_geo_strategy(args.geo_steps)
    if args.no_prefetch:
        strategy.a_sync_configs = {"prefetch_sparse": False}
    with fleet.program_guard(main_prog, startup):
        fleet.distributed_optimizer(fleet.optimizer.SGD(0.5), strategy).minimize(loss)
    if fleet.is_server():
        fleet.init_server()
        fleet.run_server()
        return 0
    exe = fleet.Executor(fleet.CPUPlace())
    exe.run(fleet.startup_program)
    fleet.init_worker()
    worker = fleet.worker_index()
    data = pathlib.Path(args.data_dir)
    all_ids = [write_part(data / f"mine-{worker}", worker, args.lines, args.signals)]
    dataset = fleet.DatasetFactory().create_dataset("QueueDataset")
    dataset.set_use_var([ids, label])
    dataset.set_batch_size(args.batch)
    dataset.set_filelist([str(data / f"mine-{worker}")])
    losses, batches = [], 0
    for _ in range(args.passes):
        result = exe.train_from_dataset(
            fleet.main_program, dataset, thread=args.threads, print_period=0, fetch_list=[loss]
        )
        losses.append(result.fetch_mean(loss.name))
        batches += result.batches
    communicator = fleet_api.instance._ps_runtime.communicator
    report = {
        "worker": worker,
        "losses": losses,
        "batches": batches,
        "served": communicator.prefetched_pulls,
        "waits": dict(communicator.trainer_waits),
    }
    # Every worker's deltas are on the servers before worker 0 reads the rows.
    fleet.barrier_worker()
    if worker == 0:
        from fleet.ps import PsClient

        for other in range(1, fleet.worker_num()):
            all_ids.append(write_part(data / "other", other, args.lines, args.signals))
        keys = np.unique(np.concatenate(all_ids))
        client = PsClient(fleet.server_endpoints())
        rows = client.pull_sparse(fleet_api.instance._ps_plan.sparse[0].table_id, keys)
        client.close()
        report["ids"] = int(keys.size)
        report["trained_rows"] = int((np.abs(rows).max(axis=1) > 0).sum())
    fleet.barrier_worker()
    print("GEO_PREFETCH_JOB " + json.dumps(report), flush=True)
    fleet.stop_worker()
    return 0


if __name__ == "__main__":
    sys.exit(main())
