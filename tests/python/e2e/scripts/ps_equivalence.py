"""A tiny model with a dense and a sparse parameter, trained for a few steps either as a PS
worker under fleetrun (each worker its own share of every step's samples) or in one process on
every worker's share joined (--single). Writes the final parameters to --out (an .npz; in PS mode
worker 0 writes them after pulling from the servers)."""

from __future__ import annotations

import argparse
import sys

import numpy as np

import fleet
from fleet import layers
from fleet.regularizer import L2Decay

VOCAB, DIM, DENSE = 6, 4, 3
DENSE_RATE = 0.5


def batch(step: int, worker: int, size: int) -> dict:
    rng = np.random.default_rng(1000 * step + worker)
    # Every id appears in every worker's batch, so that every row is updated every step (the
    # servers' Adam counts steps per row, one process per table).
    ids = np.concatenate([np.arange(VOCAB), rng.integers(-(2**40), 2**40, size=0)])
    ids = np.concatenate([ids, rng.integers(0, VOCAB, size=size * 2 - VOCAB)])
    ids = (ids * 1_000_000_007 - 17).astype(np.int64)  # raw ids: negative and > 2^32
    x = rng.normal(size=(size, DENSE)).astype(np.float32)
    y = rng.integers(0, 2, size=(size, 1)).astype(np.int64)
    return {"ids": ids.reshape(-1, 1), "x": x, "y": y, "lengths": [2] * size}


def build(optimizer: str):
    main, startup = fleet.Program(), fleet.Program()
    main.random_seed = startup.random_seed = 7
    with fleet.program_guard(main, startup):
        ids = layers.data("ids", [1], dtype="int64", lod_level=1)
        x = layers.data("x", [DENSE])
        y = layers.data("y", [1], dtype="int64")
        emb = layers.embedding(
            ids,
            size=[VOCAB, DIM],
            is_sparse=True,
            param_attr=fleet.ParamAttr(
                name="emb",
                initializer=fleet.initializer.Constant(0.0),
                # The servers add the decay of the rows each push updates.
                regularizer=L2Decay(0.3) if optimizer.endswith("_l2") else None,
            ),
        )
        pooled = layers.sequence_pool(emb, "sum")
        h = layers.concat([pooled, x], axis=1)
        # "_rate": the weight at half the optimizer's rate (ParamAttr(learning_rate)), which the
        # servers apply (sync, async) or the GEO workers' own update ops.
        weight = fleet.ParamAttr(learning_rate=DENSE_RATE) if optimizer.endswith("_rate") else None
        prob = layers.fc(h, 2, act="softmax", param_attr=weight)
        loss = layers.mean(layers.cross_entropy(prob, y))
        if optimizer == "sgd_decay":  # the servers step the schedule, one step a sync step
            decayed = layers.exponential_decay(0.2, decay_steps=2, decay_rate=0.5)
    if optimizer == "mixed":  # the embedding with its own optimizer, as a wide part would be
        return (
            main,
            startup,
            loss,
            fleet.optimizer.Adam(0.05),
            {"emb": fleet.optimizer.Adagrad(0.2)},
        )
    if optimizer == "sgd_decay":
        return main, startup, loss, fleet.optimizer.SGD(decayed), {}
    opt = {"sgd": fleet.optimizer.SGD(0.1), "adam": fleet.optimizer.Adam(0.05, lazy_mode=True)}
    return main, startup, loss, opt[optimizer.removesuffix("_l2").removesuffix("_rate")], {}


def feed_of(parts: list[dict], raw_ids: bool = True) -> dict:
    lengths = [n for p in parts for n in p["lengths"]]
    ids = np.concatenate([p["ids"] for p in parts])
    if not raw_ids:  # one process: rows 0..VOCAB-1 of a [VOCAB, DIM] table
        ids = (ids + 17) // 1_000_000_007
    return {
        "ids": fleet.LoDTensor(ids, lengths=[lengths]),
        "x": np.concatenate([p["x"] for p in parts]),
        "y": np.concatenate([p["y"] for p in parts]),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--optimizer", default="sgd")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--mode", default="sync")
    parser.add_argument("--geo_steps", type=int, default=2, help="GEO: k_steps")
    parser.add_argument("--single", action="store_true")
    parser.add_argument(
        "--only_worker",
        type=int,
        default=None,
        help="--single: train on this worker's share only (a GEO worker's local training)",
    )
    parser.add_argument(
        "--flush_each_step",
        action="store_true",
        help="PS: wait for every push after each step (async then equals sync)",
    )
    parser.add_argument(
        "--local_transport",
        default=None,
        help="PS: a_sync_configs['local_transport'] (off, unix, shm); unset: the default",
    )
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    main_prog, startup, loss, opt, table_optimizers = build(args.optimizer)
    exe = fleet.Executor(fleet.CPUPlace())
    if args.single:
        with fleet.program_guard(main_prog, startup):
            fleet.optimizer.apply_per_parameter(opt, opt.backward(loss), table_optimizers)
        exe.run(startup)
        for step in range(args.steps):
            shares = range(args.workers) if args.only_worker is None else [args.only_worker]
            parts = [batch(step, w, args.batch) for w in shares]
            exe.run(main_prog, feed=feed_of(parts, raw_ids=False), fetch_list=[loss])
        ids = np.array(sorted({int(i) for i in batch(0, 0, args.batch)["ids"][:, 0]}))
        emb = fleet.global_scope().find_var("emb").get_tensor().numpy()
        rows = emb[(ids + 17) // 1_000_000_007]
        np.savez(args.out, ids=ids, rows=rows, **_dense(main_prog))
        return 0
    fleet.init()
    strategy = {
        "sync": fleet.DistributedStrategyFactory.create_sync_strategy(),
        "async": fleet.DistributedStrategyFactory.create_async_strategy(),
        "half_async": fleet.DistributedStrategyFactory.create_half_async_strategy(),
        "geo": fleet.DistributedStrategyFactory.create_geo_strategy(args.geo_steps),
    }[args.mode]
    strategy.table_optimizers = table_optimizers
    if args.local_transport is not None:
        strategy.a_sync_configs = {"local_transport": args.local_transport}
    with fleet.program_guard(main_prog, startup):
        fleet.distributed_optimizer(opt, strategy).minimize(loss)
    if fleet.is_server():
        fleet.init_server()
        fleet.run_server()
        return 0
    exe.run(fleet.startup_program)
    fleet.init_worker()
    worker = fleet.worker_index()
    for step in range(args.steps):
        exe.run(
            fleet.main_program, feed=feed_of([batch(step, worker, args.batch)]), fetch_list=[loss]
        )
        if args.flush_each_step:
            fleet.flush_worker()
    if args.mode == "geo":
        # A GEO worker reads a row from the servers on its first pull: no worker exchanges before
        # every worker has trained, so that all start from the same values whatever the timing.
        fleet.barrier_worker()
    fleet.flush_worker()
    if args.mode == "geo":
        # Every worker's last deltas are on the servers; worker 0's second exchange (a zero dense
        # delta, no sparse rows) refreshes its dense parameters with them.
        fleet.barrier_worker()
        if worker == 0:
            fleet.flush_worker()
    if worker == 0:
        from fleet.ps import PsClient

        client = PsClient(fleet.server_endpoints())
        ids = np.array(sorted({int(i) for i in batch(0, 0, args.batch)["ids"][:, 0]}))
        rows = client.pull_sparse(1, ids)
        np.savez(args.out, ids=ids, rows=rows, **_dense(fleet.main_program))
    fleet.stop_worker()
    return 0


def _dense(program) -> dict:
    scope = fleet.global_scope()
    return {
        p.name: scope.find_var(p.name).get_tensor().numpy()
        for p in program.all_parameters()
        if scope.find_var(p.name) is not None and p.name != "emb"
    }


if __name__ == "__main__":
    sys.exit(main())
