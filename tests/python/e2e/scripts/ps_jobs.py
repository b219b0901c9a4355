"""A PS job of ps_equivalence.py's model (a sparse and a dense parameter, raw int64 ids) that
trains steps [--begin, --end), optionally restored from a checkpoint (--resume: the servers load
it in fleet.init_server) and saved at the end (--save_dir, fleet.save_persistables). Then every
worker evaluates its share of a fixed test set: its predictions and labels, and the global AUC
from fleet.metrics over the workers (--eval_out_prefix, one .npz per worker), and the model is
exported for serving (--export_dir, fleet.save_inference_model). Worker 0 writes the final
parameters to --out (as ps_equivalence.py does)."""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ps_equivalence import DENSE, VOCAB, _dense, batch, feed_of  # noqa: E402

import fleet  # noqa: E402
from fleet import layers  # noqa: E402

TEST_BATCHES = 3


def build():
    main, startup = fleet.Program(), fleet.Program()
    main.random_seed = startup.random_seed = 7
    with fleet.program_guard(main, startup):
        ids = layers.data("ids", [1], dtype="int64", lod_level=1)
        x = layers.data("x", [DENSE])
        y = layers.data("y", [1], dtype="int64")
        emb = layers.embedding(
            ids,
            size=[VOCAB, 4],
            is_sparse=True,
            param_attr=fleet.ParamAttr(name="emb", initializer=fleet.initializer.Constant(0.0)),
        )
        pooled = layers.sequence_pool(emb, "sum")
        h = layers.concat([pooled, x], axis=1)
        prob = layers.fc(h, 2, act="softmax")
        loss = layers.mean(layers.cross_entropy(prob, y))
    return main, startup, loss, prob, y


def eval_batch(index: int, worker: int) -> dict:
    # Test data of its own seeds (1000 * (500 + index) + worker): never trained on.
    return batch(500 + index, worker, 16)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--begin", type=int, default=0)
    parser.add_argument("--end", type=int, default=6)
    parser.add_argument("--resume", default="")
    parser.add_argument("--save_dir", default="")
    parser.add_argument("--export_dir", default="")
    parser.add_argument("--eval_out_prefix", default="")
    parser.add_argument("--count_filter", type=int, default=0)
    parser.add_argument("--shrink", type=int, default=-1, help="fleet.shrink after the save")
    parser.add_argument(
        "--crash_at",
        type=int,
        default=-1,
        help="train [begin, crash_at), save, and let worker 1 fail; once "
        "fleetrun restarted the job from the checkpoint, train [crash_at, end)",
    )
    parser.add_argument("--save_mode", type=int, default=0, help="save_persistables mode")
    parser.add_argument(
        "--optimizer", choices=("sgd", "adagrad"), default="sgd", help="the servers' rule"
    )
    parser.add_argument(
        "--ssd_budget_mb", type=float, default=0, help="sparse tables on the SSD tier, this budget"
    )
    parser.add_argument("--ssd_path", default="", help="with --ssd_budget_mb: their directory")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    main_prog, startup, loss, prob, label = build()
    fleet.init()
    strategy = fleet.DistributedStrategyFactory.create_sync_strategy()
    strategy.sparse_table_configs = {"count_filter": args.count_filter}
    if args.ssd_budget_mb:
        strategy.sparse_table_configs = {
            "storage": "ssd",
            "memory_budget_mb": args.ssd_budget_mb,
            "ssd_path": args.ssd_path,
        }
    with fleet.program_guard(main_prog, startup):
        rule = fleet.optimizer.SGD(0.1) if args.optimizer == "sgd" else fleet.optimizer.Adagrad(0.1)
        fleet.distributed_optimizer(rule, strategy).minimize(loss)
    test_prog = fleet.main_program.clone(for_test=True)
    with fleet.program_guard(test_prog, startup):
        _, _, [_, _, stat_pos, stat_neg] = layers.auc(prob, label)
    restarted = fleet.restart_checkpoint()
    if fleet.is_server():
        fleet.init_server(args.resume or restarted)
        fleet.run_server()
        return 0
    exe = fleet.Executor(fleet.CPUPlace())
    exe.run(fleet.startup_program)
    fleet.init_worker()
    worker = fleet.worker_index()
    begin, end = args.begin, args.end
    if args.crash_at >= 0:
        begin, end = (args.crash_at, args.end) if restarted else (args.begin, args.crash_at)
    for step in range(begin, end):
        exe.run(fleet.main_program, feed=feed_of([batch(step, worker, 8)]), fetch_list=[loss])
    fleet.flush_worker()
    if args.save_dir:
        fleet.save_persistables(exe, args.save_dir, mode=args.save_mode)
    if args.crash_at >= 0 and not restarted and worker == 1:
        print("worker 1: failing on purpose after the checkpoint", flush=True)
        os._exit(3)
    dropped = fleet.shrink(args.shrink) if args.shrink >= 0 else -1
    if args.eval_out_prefix:
        preds, labels = [], []
        for i in range(TEST_BATCHES):
            data = eval_batch(i, worker)
            (p,) = exe.run(test_prog, feed=feed_of([data]), fetch_list=[prob])
            preds.append(p)
            labels.append(data["y"])
        global_auc = fleet.metrics.auc(stat_pos, stat_neg)
        n = float(sum(len(p) for p in preds))
        correct = float(
            sum(((p[:, 1] > 0.5) == (y[:, 0] == 1)).sum() for p, y in zip(preds, labels))
        )
        np.savez(
            f"{args.eval_out_prefix}{worker}.npz",
            preds=np.concatenate(preds),
            labels=np.concatenate(labels),
            auc=global_auc,
            acc=fleet.metrics.acc(correct, n),
            sum=fleet.metrics.sum(np.array([n])),
            max=fleet.metrics.max(np.array([n])),
        )
    if args.export_dir:
        fleet.save_inference_model(
            exe, args.export_dir, ["ids", "x"], [prob], main_program=test_prog
        )
    if worker == 0:
        from fleet.ps import PsClient

        client = PsClient(fleet.server_endpoints())
        ids = np.array(sorted({int(i) for i in batch(0, 0, 8)["ids"][:, 0]}))
        stats = [t for server in client.stats() for t in server if t.table_id == 1]
        rows = client.pull_sparse(1, ids)
        extra = {"dropped": dropped, "filtered": sum(t.filtered_keys for t in stats)}
        if args.ssd_budget_mb:  # the SSD tier's counters beside the values
            extra = {
                k: sum(getattr(t.ssd, k) for t in stats) for k in ("rows_on_disk", "evictions")
            }
            np.savez(args.out, ids=ids, rows=rows, **extra, **_dense(fleet.main_program))
        elif args.shrink >= 0 or args.count_filter:
            np.savez(args.out, **extra)
        else:
            np.savez(args.out, ids=ids, rows=rows, **_dense(fleet.main_program))
        client.close()
    fleet.stop_worker()
    return 0


if __name__ == "__main__":
    sys.exit(main())
