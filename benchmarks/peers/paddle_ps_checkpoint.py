"""Peer benchmark: PaddlePaddle 2.6.2's checkpoint save and load of a sparse table (the_one_ps,
MemorySparseTable), the peer of benchmarks/ps_checkpoint.py.

Why: ps_checkpoint.py runs this in the same run as Fleet's save and restore of a table of the
same rows and dim, and reports the ratios of the times (save_vs_paddle, load_vs_paddle).

One job is one server and one worker (1 process each), launched by paddle.distributed.launch:
  --phase save  the worker fills the table with keys 0..rows-1 (a sparse_embedding, the PS
                lookup, of --dim columns; Adagrad rule on the server: SparseAccessor with
                SparseAdaGradSGDRule for embed and embedx; one pushed gradient a row creates it
                with optimizer state), then times fleet.save_persistables(exe, --dir), repeated
                until --min_seconds (mode 0: every row; the_one_ps's save_all_model: gzip'd
                text part files written by the server)
  --phase load  a fresh job (empty table) times fleet.load_model(--dir, mode=0): the restore
                a job does when it starts from a checkpoint.
The worker writes one JSON object to --out: the phase, rows, seconds of the timed calls
(save_s, a list, or load_s), and for a save the bytes written; its log has the rows the
server's table holds after the fill or the load ("feasign size: N").

  PADDLE_WITH_GLOO=1 .venv-peers/paddle26/bin/python -m paddle.distributed.launch \
      --server_num=1 --worker_num=1 benchmarks/peers/paddle_ps_checkpoint.py \
      --phase save --rows 1000000 --dim 8 --dir /tmp/ckpt --out /tmp/save.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

# isort: off
import paddle_ps_common  # noqa: F401  (first: it sets the thread counts before Paddle loads)
import numpy as np
import paddle

# isort: on

TABLE = "emb"
FILL_BATCH = 1 << 17


def build(args: argparse.Namespace):
    """(main, startup, ids, loss, optimizer) before minimize: loss = sum of the looked-up rows,
    so every looked-up row gets a gradient of ones."""
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        ids = paddle.static.data("ids", [None, 1], "int64")
        emb = paddle.static.nn.sparse_embedding(
            ids, [args.rows, args.dim], param_attr=paddle.ParamAttr(name=TABLE)
        )
        loss = paddle.sum(emb)
    # The dense (common) optimizer must be SGD or Adam; the sparse rule is set per table below.
    optimizer = paddle.optimizer.SGD(learning_rate=0.05)
    return main, startup, ids, loss, optimizer


def strategy() -> object:
    from paddle.distributed import fleet

    s = fleet.DistributedStrategy()
    s.a_sync = True
    s.a_sync_configs = {"k_steps": 0}
    prefix = f"table_parameters.{TABLE}.accessor"
    s.sparse_table_configs = {
        TABLE: {
            f"{prefix}.embed_sgd_param.name": "SparseAdaGradSGDRule",
            f"{prefix}.embedx_sgd_param.name": "SparseAdaGradSGDRule",
        }
    }
    return s


def dir_bytes(path: str) -> int:
    total = 0
    for folder, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(folder, f)) for f in files)
    return total


def run(args: argparse.Namespace) -> dict | None:
    from paddle.distributed import fleet

    fleet.init()
    main, startup, ids, loss, optimizer = build(args)
    with paddle.static.program_guard(main, startup):
        fleet.distributed_optimizer(optimizer, strategy()).minimize(loss)
        main, startup = loss.block.program, paddle.static.default_startup_program()
    if args.debug:
        print("ops:", [op.type for op in main.global_block().ops], flush=True)
    if fleet.is_server():
        fleet.init_server()
        fleet.run_server()
        return None
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    fleet.init_worker()
    result: dict = {"phase": args.phase, "rows": args.rows, "dim": args.dim}
    if args.phase == "save":
        start = time.perf_counter()
        for begin in range(0, args.rows, FILL_BATCH):
            batch = np.arange(begin, min(begin + FILL_BATCH, args.rows), dtype=np.int64)
            (value,) = exe.run(main, feed={ids.name: batch[:, None]}, fetch_list=[loss])
            if args.debug:
                print("fill", begin, float(np.asarray(value).sum()), flush=True)
        # The pushes are asynchronous and create the rows (the pulls do not, by default): wait
        # until the server has them all. Private API of the_one_ps (its stop_worker does this).
        fleet.fleet._runtime_handle._worker.client_flush()
        result["fill_s"] = time.perf_counter() - start
        # Repeated (into the same folder) until --min_seconds have passed: one figure a save.
        result["save_s"] = []
        while not result["save_s"] or sum(result["save_s"]) < args.min_seconds:
            start = time.perf_counter()
            fleet.save_persistables(exe, args.dir)
            result["save_s"].append(time.perf_counter() - start)
        result["bytes"] = dir_bytes(args.dir)
    else:
        start = time.perf_counter()
        fleet.load_model(args.dir, mode=0)
        result["load_s"] = time.perf_counter() - start
    # Prints "table id: 0, feasign size: N" (the rows the server holds) to the worker's log,
    # which ps_checkpoint.py checks: a restore must bring back every row.
    fleet.fleet._runtime_handle._worker.sparse_table_stat(0)
    fleet.stop_worker()
    result["paddle_version"] = paddle.__version__
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phase", choices=("save", "load"), required=True)
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--dim", type=int, default=8)
    parser.add_argument("--dir", required=True, help="the checkpoint folder")
    parser.add_argument("--out", required=True, help="the worker writes its JSON here")
    parser.add_argument(
        "--min_seconds", type=float, default=0, help="save again until this many seconds passed"
    )
    parser.add_argument("--debug", action="store_true", help="print the worker's op types")
    args = parser.parse_args(argv)
    paddle.enable_static()
    result = run(args)
    if result is None:
        return 0
    with open(args.out, "w") as f:
        json.dump(result, f)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
