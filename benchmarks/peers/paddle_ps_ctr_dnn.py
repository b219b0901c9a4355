"""Peer benchmark: CTR-DNN on PaddlePaddle 2.6.2's parameter server (fleet 2.x API, the_one_ps).

Why: benchmarks/ps_train.py runs this in the same run as Fleet's parameter-server jobs and
reports the ratio of the throughputs and the AUCs per mode. The network is PaddleRec's static
CTR-DNN in its per-slot form, the same as examples/ctr_dnn/model.py's default "slots" layout:
26 lod_level-1 id slots sharing one [sparse_dim, 10] embedding (is_sparse, Xavier init),
sum-pooled, concatenated with the 13 dense features, fc 400-400-400 ReLU (Normal(0,
1/sqrt(fan_in)) init), a 2-way softmax and cross entropy, Adam lr 1e-3 (lazy_mode).

Why 2.6.2: PyPI's 3.3.1 CPU wheel lacks the parameter-server core; 2.6.2 is the newest that has
it (its own venv, .venv-peers/paddle26: bash benchmarks/peers/setup.sh 2.6.2).

Modes (--mode): async (a_sync, k_steps 0), geo (a_sync, k_steps K), sync (a_sync False), or
single (no parameter server: one process, the same driver). Every mode trains with
train_from_dataset (QueueDataset, --thread threads) on the files Fleet reads, through the
same --pipe_command ("cat" for MultiSlot files, or Fleet's Criteo reader for raw ones);
in async mode Paddle 2.6.2 refreshes the worker's dense parameters only under this driver.
Worker i reads files i, i+W, ... After training every worker waits for the others (Gloo
barrier: launch with PADDLE_WITH_GLOO=1, or barrier_worker silently does nothing), worker 0
pulls the dense parameters from the servers and scores the test file (sparse rows pulled by the
program's lookups), and each worker writes one JSON line of its figures to --out_dir.

  PADDLE_WITH_GLOO=1 .venv-peers/paddle26/bin/python -m paddle.distributed.launch \
      --server_num=1 --worker_num=2 benchmarks/peers/paddle_ps_ctr_dnn.py --mode async \
      --train_files part-0 part-1 --test_file test.txt --pipe_command "..." --out_dir DIR
  .venv-peers/paddle26/bin/python benchmarks/peers/paddle_ps_ctr_dnn.py --mode single ...
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

# isort: off
import paddle_ps_common as common  # first: it sets the thread counts before Paddle loads
import numpy as np
import paddle

# isort: on

NUM_DENSE, NUM_SPARSE = 13, 26
criteo_reader = common.load_example("ctr_dnn", "criteo_reader")
baselines = common.load_example("ctr_dnn", "baselines")


def _fc(x, width: int, activation: str | None):
    attr = paddle.ParamAttr(
        initializer=paddle.nn.initializer.Normal(std=1.0 / math.sqrt(int(x.shape[-1])))
    )
    return paddle.static.nn.fc(x, width, weight_attr=attr, activation=activation)


def build(args: argparse.Namespace):
    """(main, startup, use_vars in MultiSlot order, loss, predict, optimizer) before minimize."""
    main, startup = paddle.static.Program(), paddle.static.Program()
    main.random_seed = startup.random_seed = args.seed
    with paddle.static.program_guard(main, startup):
        dense = paddle.static.data("dense_input", [None, NUM_DENSE], "float32")
        slots = [
            paddle.static.data(f"C{i + 1}", [None, 1], "int64", lod_level=1)
            for i in range(NUM_SPARSE)
        ]
        label = paddle.static.data("label", [None, 1], "int64")
        table = paddle.ParamAttr(
            name="SparseFeatFactors", initializer=paddle.nn.initializer.XavierUniform()
        )
        pooled = []
        for ids in slots:
            emb = paddle.static.nn.embedding(
                ids, [args.sparse_dim, args.embedding_dim], is_sparse=True, param_attr=table
            )
            # [N, 1, dim] -> [N, dim]: the lookup keeps the ids' trailing 1 (reshape keeps LoD).
            emb = paddle.reshape(emb, [-1, args.embedding_dim])
            pooled.append(paddle.static.nn.sequence_lod.sequence_pool(emb, "sum"))
        x = paddle.concat(pooled + [dense], axis=1)
        for width in (400, 400, 400):
            x = _fc(x, width, "relu")
        logits = _fc(x, 2, None)
        predict = paddle.nn.functional.softmax(logits)
        loss = paddle.mean(paddle.nn.functional.cross_entropy(logits, label))
    optimizer = paddle.optimizer.Adam(learning_rate=args.learning_rate, lazy_mode=True)
    return main, startup, [dense, *slots, label], loss, predict, optimizer


def _lod_feed(batch, place) -> dict:
    """The feed of one test batch: each slot one id per sample, as a LoD tensor."""
    n = len(batch)
    feed = {"dense_input": batch.dense, "label": batch.label}
    for slot in range(NUM_SPARSE):
        feed[f"C{slot + 1}"] = paddle.base.create_lod_tensor(
            np.ascontiguousarray(batch.sparse[:, slot : slot + 1]), [[1] * n], place
        )
    return feed


def evaluate(exe, program, predict, test_file: str, sparse_dim: int) -> float:
    """Test AUC of `program` (the forward part of the trained program) on `test_file`."""
    data = criteo_reader.read_criteo([test_file], sparse_dim=sparse_dim)
    place, probs = paddle.CPUPlace(), []
    for batch in criteo_reader.iterate_batches(data, 4096):
        (p,) = exe.run(program, feed=_lod_feed(batch, place), fetch_list=[predict])
        probs.append(np.asarray(p)[:, 1])
    return float(baselines.roc_auc(data.label[:, 0], np.concatenate(probs)))


def run_single(args: argparse.Namespace) -> dict:
    main, startup, use_vars, loss, predict, optimizer = build(args)
    test = main.clone(for_test=True)
    with paddle.static.program_guard(main, startup):
        optimizer.minimize(loss)
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    result = common.train_pass(exe, main, use_vars, loss, list(args.train_files), args)
    result["test_auc"] = evaluate(exe, test, predict, args.test_file, args.sparse_dim)
    return result


def run_ps(args: argparse.Namespace) -> dict | None:
    from paddle.distributed import fleet

    fleet.init()

    def evaluate_test_file(exe, test, predict) -> dict:  # noqa: ANN001
        if args.mode != "geo":  # GEO evaluates the worker's copy, synced every k steps
            _pull_dense_parameters()
        return {"test_auc": evaluate(exe, test, predict, args.test_file, args.sparse_dim)}

    return common.run_ps_job(args, build(args), evaluate_test_file)


def _pull_dense_parameters() -> None:
    """Replaces the worker's dense parameters with the servers' (async refreshes them only
    while train_from_dataset runs; GEO keeps a local copy). Private API of the_one_ps."""
    from paddle.distributed import fleet
    from paddle.distributed.ps.utils.public import get_the_one_recv_context

    runtime = fleet.fleet._runtime_handle
    dense_map = get_the_one_recv_context(
        runtime.context, split_dense_table=runtime.is_heter_ps_mode
    )
    runtime._pull_all_dense(runtime.scopes, runtime._send_ctx, dense_map)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("async", "geo", "sync", "single"), required=True)
    # Not --train / --test: paddle.distributed.launch takes abbreviations of its own options.
    parser.add_argument("--train_files", nargs="+", required=True, help="raw Criteo training files")
    parser.add_argument("--test_file", required=True, help="raw Criteo test file")
    parser.add_argument(
        "--pipe_command",
        required=True,
        help="turns raw Criteo lines into MultiSlot lines (Fleet's reader)",
    )
    parser.add_argument("--out_dir", required=True, help="each process writes <role>.json here")
    parser.add_argument("--thread", type=int, default=1)
    parser.add_argument("--batch_size", type=int, default=512)
    parser.add_argument("--k_steps", type=int, default=10, help="GEO: steps between syncs")
    parser.add_argument("--sparse_dim", type=int, default=criteo_reader.DEFAULT_SPARSE_DIM)
    parser.add_argument("--embedding_dim", type=int, default=10)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--print_period", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    paddle.enable_static()
    paddle.seed(args.seed)
    result = run_single(args) if args.mode == "single" else run_ps(args)
    if result is None:
        return 0
    result.update(mode=args.mode, paddle_version=paddle.__version__)
    name = f"worker{result.get('worker', 0)}.json"
    with open(os.path.join(args.out_dir, name), "w") as f:
        json.dump(result, f)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
