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

import os

# One thread everywhere, set before Paddle (and its OpenMP/MKL runtimes) are loaded. Not
# CPU_NUM: train_from_dataset sizes its reader pool from it.
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import paddle  # noqa: E402

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE_DIR = os.path.join(REPO_ROOT, "examples", "ctr_dnn")
NUM_DENSE, NUM_SPARSE = 13, 26


def _load_example(name: str):
    # The examples folder is not a package and this venv does not install `fleet`: load by path.
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, os.path.join(EXAMPLE_DIR, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


criteo_reader = _load_example("criteo_reader")
baselines = _load_example("baselines")


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


def strategy_for(args: argparse.Namespace):
    from paddle.distributed import fleet

    strategy = fleet.DistributedStrategy()
    strategy.a_sync = args.mode != "sync"
    if args.mode == "async":
        strategy.a_sync_configs = {"k_steps": 0}
    elif args.mode == "geo":
        strategy.a_sync_configs = {"k_steps": args.k_steps}
    return strategy


def make_dataset(use_vars, files: list[str], args: argparse.Namespace):
    dataset = paddle.distributed.QueueDataset()
    dataset.init(
        batch_size=args.batch_size,
        thread_num=args.thread,
        use_var=use_vars,
        pipe_command=args.pipe_command,
    )
    dataset.set_filelist(files)
    return dataset


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


def _count_rows(files: list[str]) -> int:
    rows = 0
    for path in files:
        with open(path, "rb") as f:
            rows += sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    return rows


def _train(exe, main, use_vars, loss, files: list[str], args: argparse.Namespace) -> dict:
    dataset = make_dataset(use_vars, files, args)
    start = time.perf_counter()
    exe.train_from_dataset(
        program=main,
        dataset=dataset,
        thread=args.thread,
        debug=False,
        fetch_list=[loss],
        fetch_info=["loss"],
        print_period=args.print_period,
    )
    seconds = time.perf_counter() - start
    samples = _count_rows(files)
    return {"samples": samples, "seconds": seconds, "samples_per_sec": samples / seconds}


def run_single(args: argparse.Namespace) -> dict:
    main, startup, use_vars, loss, predict, optimizer = build(args)
    test = main.clone(for_test=True)
    with paddle.static.program_guard(main, startup):
        optimizer.minimize(loss)
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    result = _train(exe, main, use_vars, loss, list(args.train_files), args)
    result["test_auc"] = evaluate(exe, test, predict, args.test_file, args.sparse_dim)
    return result


def run_ps(args: argparse.Namespace) -> dict | None:
    from paddle.distributed import fleet

    fleet.init()
    main, startup, use_vars, loss, predict, optimizer = build(args)
    with paddle.static.program_guard(main, startup):
        optimizer = fleet.distributed_optimizer(optimizer, strategy_for(args))
        optimizer.minimize(loss)
        # minimize builds new programs for this role: the main one becomes the loss's program
        # and the startup one the default (until the guard ends).
        main, startup = loss.block.program, paddle.static.default_startup_program()
    if fleet.is_server():
        fleet.init_server()
        fleet.run_server()
        return None
    worker, workers = fleet.worker_index(), fleet.worker_num()
    # The rewritten forward part: lookups pull rows from the servers; no gradient is sent.
    predict = main.global_block().var(predict.name)
    test = main._prune(targets=[predict])
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    fleet.init_worker()
    result = _train(exe, main, use_vars, loss, list(args.train_files)[worker::workers], args)
    fleet.barrier_worker()  # every worker's pushes are on the servers
    if worker == 0:
        if args.mode != "geo":  # GEO evaluates the worker's copy, synced every k steps
            _pull_dense_parameters()
        result["test_auc"] = evaluate(exe, test, predict, args.test_file, args.sparse_dim)
    fleet.barrier_worker()
    fleet.stop_worker()
    result["worker"] = worker
    return result


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
