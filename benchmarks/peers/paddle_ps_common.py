"""What the PaddlePaddle 2.6.2 parameter-server peers (paddle_ps_ctr_dnn.py, paddle_ps_word2vec.py)
share: one thread per process, the strategy of a mode, a QueueDataset over the files Fleet reads,
the timed train_from_dataset pass, and loading an example module by path (the peer venv does not
install `fleet`).

Import it before paddle: it sets the thread counts, which Paddle's OpenMP/MKL runtimes read when
they load.
"""

from __future__ import annotations

import os

# One thread everywhere. Not CPU_NUM: train_from_dataset sizes its reader pool from it.
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

import importlib.util  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from types import ModuleType  # noqa: E402

import paddle  # noqa: E402

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_example(example: str, name: str) -> ModuleType:
    """examples/<example>/<name>.py as module `name` (the examples folders are not packages)."""
    if name in sys.modules:
        return sys.modules[name]
    path = os.path.join(REPO_ROOT, "examples", example, f"{name}.py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def strategy_for(mode: str, k_steps: int):
    """Paddle 2.x's strategy of `mode`: sync (a_sync False), async (k_steps 0), geo (k_steps)."""
    from paddle.distributed import fleet

    strategy = fleet.DistributedStrategy()
    strategy.a_sync = mode != "sync"
    if mode == "async":
        strategy.a_sync_configs = {"k_steps": 0}
    elif mode == "geo":
        strategy.a_sync_configs = {"k_steps": k_steps}
    return strategy


def count_rows(files: list[str]) -> int:
    rows = 0
    for path in files:
        with open(path, "rb") as f:
            rows += sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    return rows


def train_pass(exe, main, use_vars, loss, files: list[str], args) -> dict:  # noqa: ANN001
    """One timed train_from_dataset pass over `files` (QueueDataset, args.thread threads,
    args.pipe_command, args.batch_size): samples, seconds, samples_per_sec."""
    dataset = paddle.distributed.QueueDataset()
    dataset.init(
        batch_size=args.batch_size,
        thread_num=args.thread,
        use_var=use_vars,
        pipe_command=args.pipe_command,
    )
    dataset.set_filelist(files)
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
    samples = count_rows(files)
    return {"samples": samples, "seconds": seconds, "samples_per_sec": samples / seconds}


def run_ps_job(args, built, evaluate) -> dict | None:  # noqa: ANN001
    """One process of a Paddle PS job: `built` is (main, startup, use_vars, loss, target,
    optimizer) before minimize; a server serves until the job ends (None), a worker trains on
    its share of args.train_files (worker i: files i, i+W, ...), and after every worker's pushes
    are on the servers worker 0 adds `evaluate(exe, test_program, target)` (a dict) to its
    figures."""
    from paddle.distributed import fleet

    main, startup, use_vars, loss, target, optimizer = built
    with paddle.static.program_guard(main, startup):
        strategy = strategy_for(args.mode, args.k_steps)
        fleet.distributed_optimizer(optimizer, strategy).minimize(loss)
        # minimize builds new programs for this role: the main one becomes the loss's program
        # and the startup one the default (until the guard ends).
        main, startup = loss.block.program, paddle.static.default_startup_program()
    if fleet.is_server():
        fleet.init_server()
        fleet.run_server()
        return None
    worker, workers = fleet.worker_index(), fleet.worker_num()
    # The rewritten forward part: lookups pull rows from the servers; no gradient is sent.
    target = main.global_block().var(target.name)
    test = main._prune(targets=[target])
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    fleet.init_worker()
    result = train_pass(exe, main, use_vars, loss, list(args.train_files)[worker::workers], args)
    fleet.barrier_worker()  # every worker's pushes are on the servers
    if worker == 0:
        result.update(evaluate(exe, test, target))
    fleet.barrier_worker()
    fleet.stop_worker()
    result["worker"] = worker
    return result
