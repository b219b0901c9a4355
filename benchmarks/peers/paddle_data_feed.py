"""Peer benchmark: Paddle's MultiSlot data feed and train_from_dataset on the files Fleet's
benchmarks/data_feed.py reads, in the same run.

Why: data_feed.py reports Fleet's figures as ratios to these. The network is PaddleRec's
static CTR-DNN in its per-slot form (26 lod_level-1 id slots sharing one [sparse_dim, 10]
embedding with sparse gradients, sum-pooled, 13 dense features, fc 400-400-400 ReLU, 2-way
softmax, Adam lazy_mode), the same as examples/ctr_dnn/model.py's "slots" layout.

Runs only inside the peer venv (bash benchmarks/peers/setup.sh):
  .venv-peers/paddle/bin/python benchmarks/peers/paddle_data_feed.py --files F1 F2 ... \
      --threads 1 --batch_size 512
Prints one JSON line: parse (load_into_memory) and train (QueueDataset) timings per thread count.
"""

from __future__ import annotations

import os

# Not CPU_NUM: train_from_dataset sizes its reader pool from it and then refuses thread=2.
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"
os.environ["FLAGS_enable_pir_api"] = "0"  # legacy IR: sparse gradients, as paddle_ctr_dnn.py

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402

import paddle  # noqa: E402

NUM_DENSE, NUM_SPARSE = 13, 26


def _fc(x, width: int, activation: str | None):
    attr = paddle.ParamAttr(
        initializer=paddle.nn.initializer.Normal(std=1.0 / math.sqrt(int(x.shape[-1])))
    )
    return paddle.static.nn.fc(x, width, weight_attr=attr, activation=activation)


def build(sparse_dim: int):
    """(main, startup, use_vars in MultiSlot order, loss)."""
    main, startup = paddle.static.Program(), paddle.static.Program()
    main.random_seed = startup.random_seed = 1
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
                ids, [sparse_dim, 10], is_sparse=True, param_attr=table
            )
            # [N, 1, 10] -> [N, 10]: the lookup keeps the ids' trailing 1 (reshape keeps LoD).
            emb = paddle.reshape(emb, [-1, 10])
            pooled.append(paddle.static.nn.sequence_lod.sequence_pool(emb, "sum"))
        x = paddle.concat(pooled + [dense], axis=1)
        for width in (400, 400, 400):
            x = _fc(x, width, "relu")
        logits = _fc(x, 2, None)
        loss = paddle.mean(paddle.nn.functional.cross_entropy(logits, label))
        paddle.optimizer.Adam(learning_rate=1e-3, lazy_mode=True).minimize(loss)
    return main, startup, [dense, *slots, label], loss


def make_dataset(kind: str, use_vars, files, threads: int, batch_size: int):
    dataset = (
        paddle.distributed.InMemoryDataset()
        if kind == "in_memory"
        else paddle.distributed.QueueDataset()
    )
    dataset.init(batch_size=batch_size, thread_num=threads, use_var=use_vars, pipe_command="cat")
    dataset.set_filelist(files)
    return dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", nargs="+", required=True, help="MultiSlot text files")
    # One thread count per process: after a thread=1 pass, Paddle 3.3.1 refuses a thread=2 one
    # in the same process ("pool.size() ... expected 2 but received 1").
    parser.add_argument("--threads", nargs="+", type=int, default=[1])
    parser.add_argument("--batch_size", type=int, default=512)
    parser.add_argument("--sparse_dim", type=int, default=1_000_001)
    parser.add_argument("--parse_rounds", type=int, default=2, help="best of this many loads")
    args = parser.parse_args()
    paddle.enable_static()
    main_program, startup, use_vars, loss = build(args.sparse_dim)
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    result = {"paddle": paddle.__version__, "parse": {}, "train": {}}
    for threads in args.threads:
        best, samples = float("inf"), 0
        for _ in range(args.parse_rounds):
            dataset = make_dataset("in_memory", use_vars, args.files, threads, args.batch_size)
            start = time.perf_counter()
            dataset.load_into_memory()
            best = min(best, time.perf_counter() - start)
            samples = int(dataset.get_memory_data_size())
            dataset.release_memory()
        result["parse"][str(threads)] = {"seconds": best, "samples": samples}
    for threads in args.threads:
        dataset = make_dataset("queue", use_vars, args.files, threads, args.batch_size)
        start = time.perf_counter()
        exe.train_from_dataset(main_program, dataset, thread=threads, print_period=1_000_000)
        result["train"][str(threads)] = {"seconds": time.perf_counter() - start}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
