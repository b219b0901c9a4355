"""Peer benchmark: PaddleRec's CTR-DNN trained with Paddle's static graph on one CPU thread.

Why: Fleet's own CTR-DNN benchmark runs this script in the same run and reports the ratio of the
two throughputs, so both must train the same model on the same features. The model follows
PaddleRec ``models/rank/dnn`` (static mode): 26 sparse slots, one id each, looked up in one shared
embedding table [sparse_dim, 10] with sparse gradients, concatenated with the 13 dense features,
fc 400-400-400 ReLU (Normal(0, 1/sqrt(fan_in)) init), a 2-way softmax and cross entropy, Adam
lr 1e-3 with ``lazy_mode=True`` (only the rows a batch touches are updated, as on a parameter
server). With exactly one id per slot, PaddleRec's per-slot ``sequence_pool(sum)`` is the lookup
itself, so a single [N, 26] lookup reshaped to [N, 260] computes the same thing.

The table starts from Paddle's default Xavier init (about +-0.0024), not PaddleRec's
Uniform(-1, 1) (``--embedding_init uniform``): on 200k rows the large random codes let the MLP
memorise rows, and best test AUC was 0.015-0.025 lower in our runs on the default generated data.
(The random codes do help it learn slot-pair interactions, which a near-zero init barely learns.)

Data comes from ``examples/ctr_dnn/criteo_reader.py`` and is parsed before the clock starts; the
timed region covers slicing the batch, the feed and ``Executor.run`` (forward, backward, update),
after ``--warmup_batches`` untimed batches.

Runs only inside the peer venv (``bash benchmarks/peers/setup.sh``):
  .venv-peers/paddle/bin/python benchmarks/peers/paddle_ctr_dnn.py \
      --train DIR/train.txt --test DIR/test.txt --epochs 1 --json
Prints ``test_auc=<value>`` and, with ``--json``, a final JSON line.
"""

from __future__ import annotations

import os

# One thread everywhere, set before Paddle (and its OpenMP/MKL runtimes) are loaded.
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "CPU_NUM"):
    os.environ[_var] = "1"
# Build legacy ("fluid") static programs, not PIR ones. In Paddle 3.3.1 a PIR program lowers the
# sparse embedding gradient to a dense [sparse_dim, 10] tensor, so Adam updates all 10M entries
# every step (measured 82 vs 46 ms per batch of 512); the legacy IR keeps the SelectedRows gradient
# and lazy Adam that PaddleRec's static CTR-DNN relies on. Only read at import, hence here.
os.environ["FLAGS_enable_pir_api"] = "0"

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import paddle  # noqa: E402

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE_DIR = os.path.join(REPO_ROOT, "examples", "ctr_dnn")


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


@dataclasses.dataclass
class ModelConfig:
    """CTR-DNN shape and optimiser; PaddleRec's values but embedding dim 10 and fc 400x3."""

    sparse_dim: int = criteo_reader.DEFAULT_SPARSE_DIM
    embedding_dim: int = 10
    hidden: tuple[int, ...] = (400, 400, 400)
    optimizer: str = "adam"  # or "adagrad"
    embedding_init: str = "xavier"  # or "uniform", PaddleRec's Uniform(-1, 1)
    learning_rate: float = 1e-3
    seed: int = 0


@dataclasses.dataclass
class Programs:
    main: paddle.static.Program
    startup: paddle.static.Program
    test: paddle.static.Program
    loss: object
    predict: object


def build_programs(cfg: ModelConfig) -> Programs:
    """Builds the train, startup and (cloned, optimizer-free) test programs."""
    main, startup = paddle.static.Program(), paddle.static.Program()
    main.random_seed = startup.random_seed = cfg.seed
    with paddle.static.program_guard(main, startup):
        dense = paddle.static.data("dense_input", [None, criteo_reader.NUM_DENSE], "float32")
        sparse = paddle.static.data("sparse_input", [None, criteo_reader.NUM_SPARSE], "int64")
        label = paddle.static.data("label", [None, 1], "int64")
        emb = paddle.static.nn.embedding(
            sparse,
            size=[cfg.sparse_dim, cfg.embedding_dim],
            is_sparse=True,
            param_attr=paddle.ParamAttr(
                name="SparseFeatFactors", initializer=_embedding_initializer(cfg.embedding_init)
            ),
        )
        flat = paddle.reshape(emb, [-1, criteo_reader.NUM_SPARSE * cfg.embedding_dim])
        x = paddle.concat([flat, dense], axis=1)
        for width in cfg.hidden:
            x = _fc(x, width, "relu")
        logits = _fc(x, 2, None)
        predict = paddle.nn.functional.softmax(logits)
        loss = paddle.mean(paddle.nn.functional.cross_entropy(logits, label))
        test = main.clone(for_test=True)  # forward only, same parameters
        if cfg.optimizer == "adam":
            opt = paddle.optimizer.Adam(learning_rate=cfg.learning_rate, lazy_mode=True)
        elif cfg.optimizer == "adagrad":
            opt = paddle.optimizer.Adagrad(learning_rate=cfg.learning_rate)
        else:
            raise ValueError(f"--optimizer must be adam or adagrad, got {cfg.optimizer!r}")
        opt.minimize(loss)
    return Programs(main, startup, test, loss, predict)


def _embedding_initializer(name: str):
    if name == "xavier":
        return paddle.nn.initializer.XavierUniform()
    if name == "uniform":
        return paddle.nn.initializer.Uniform(-1.0, 1.0)
    raise ValueError(f"--embedding_init must be xavier or uniform, got {name!r}")


def _fc(x, width: int, activation: str | None):
    fan_in = int(x.shape[-1])
    attr = paddle.ParamAttr(initializer=paddle.nn.initializer.Normal(std=1.0 / math.sqrt(fan_in)))
    return paddle.static.nn.fc(x, width, weight_attr=attr, activation=activation)


class _Stopwatch:
    """Accumulates wall and process CPU time over start/stop intervals."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0
        self._since: tuple[float, float] | None = None

    def start(self) -> None:
        self._since = (time.perf_counter(), time.process_time())

    def stop(self) -> None:
        if self._since is not None:
            self.wall += time.perf_counter() - self._since[0]
            self.cpu += time.process_time() - self._since[1]
            self._since = None


def _feed(batch) -> dict[str, np.ndarray]:
    return {"dense_input": batch.dense, "sparse_input": batch.sparse, "label": batch.label}


def evaluate(exe, programs: Programs, data, batch_size: int = 8192) -> np.ndarray:
    """Click probabilities [N] of the test program over ``data``."""
    out = []
    for batch in criteo_reader.iterate_batches(data, batch_size):
        (prob,) = exe.run(programs.test, feed=_feed(batch), fetch_list=[programs.predict])
        out.append(np.asarray(prob)[:, 1])
    return np.concatenate(out)


def train(args: argparse.Namespace) -> dict:
    paddle.enable_static()
    paddle.base.core.set_num_threads(1)  # the math library's pool; env vars cover OpenMP
    paddle.seed(args.seed)
    t0 = time.perf_counter()
    train_data = criteo_reader.read_criteo(args.train, sparse_dim=args.sparse_dim)
    test_data = criteo_reader.read_criteo(args.test, sparse_dim=args.sparse_dim)
    print(
        f"parsed {len(train_data)} train / {len(test_data)} test rows in "
        f"{time.perf_counter() - t0:.1f}s (not timed)",
        flush=True,
    )
    cfg = ModelConfig(
        sparse_dim=args.sparse_dim,
        optimizer=args.optimizer,
        embedding_init=args.embedding_init,
        learning_rate=args.learning_rate,
        seed=args.seed,
    )
    programs = build_programs(cfg)
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(programs.startup)

    watch, step, timed_samples, auc = _Stopwatch(), 0, 0, float("nan")
    for epoch in range(args.epochs):
        losses = []
        if step >= args.warmup_batches:
            watch.start()
        for batch in criteo_reader.iterate_batches(train_data, args.batch_size):
            (loss,) = exe.run(programs.main, feed=_feed(batch), fetch_list=[programs.loss])
            losses.append(float(np.asarray(loss)))
            step += 1
            if step > args.warmup_batches:
                timed_samples += len(batch)
            elif step == args.warmup_batches:
                watch.start()
            if step % args.log_every == 0:
                recent = np.mean(losses[-args.log_every :])
                print(f"epoch={epoch + 1} step={step} loss={recent:.5f}", flush=True)
            if args.max_batches and step >= args.max_batches:
                break
        watch.stop()
        probs = evaluate(exe, programs, test_data)
        auc = baselines.roc_auc(test_data.label, probs)
        print(
            f"epoch={epoch + 1} train_loss={np.mean(losses):.5f} test_auc={auc:.5f} "
            f"test_logloss={baselines.log_loss(test_data.label, probs):.5f}",
            flush=True,
        )
        if args.max_batches and step >= args.max_batches:
            break
    return {
        "peer": "paddle",
        "paddle_version": paddle.__version__,
        "model": "ctr_dnn",
        "threads": 1,
        "batch_size": args.batch_size,
        "optimizer": args.optimizer,
        "embedding_init": args.embedding_init,
        "epochs_run": epoch + 1,
        "train_rows": len(train_data),
        "steps": step,
        "warmup_batches": args.warmup_batches,
        "timed_samples": timed_samples,
        "timed_seconds": watch.wall,
        "samples_per_sec": timed_samples / watch.wall if watch.wall > 0 else None,
        # CPU seconds per wall second while timed; about 1.0 confirms the single-thread claim.
        "cpu_utilisation": watch.cpu / watch.wall if watch.wall > 0 else None,
        "test_auc": auc,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Paddle static-graph CTR-DNN peer (1 thread).")
    parser.add_argument("--train", nargs="+", required=True, help="Criteo-format training files")
    parser.add_argument("--test", required=True, help="Criteo-format test file")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch_size", type=int, default=512)
    parser.add_argument(
        "--max_batches",
        type=int,
        default=0,
        help="stop after this many training batches (0 = all); for timing",
    )
    parser.add_argument(
        "--warmup_batches", type=int, default=20, help="leading batches left out of samples_per_sec"
    )
    parser.add_argument("--sparse_dim", type=int, default=criteo_reader.DEFAULT_SPARSE_DIM)
    parser.add_argument("--optimizer", choices=("adam", "adagrad"), default="adam")
    parser.add_argument(
        "--embedding_init",
        choices=("xavier", "uniform"),
        default="xavier",
        help="xavier: Paddle's default; uniform: PaddleRec's Uniform(-1, 1)",
    )
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log_every", type=int, default=100)
    parser.add_argument("--json", action="store_true", help="end with one JSON line of results")
    args = parser.parse_args(argv)
    if args.epochs < 1 or args.batch_size < 1 or args.warmup_batches < 0:
        parser.error("need --epochs >= 1, --batch_size >= 1, --warmup_batches >= 0")
    result = train(args)
    print(f"test_auc={result['test_auc']:.5f}")
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
