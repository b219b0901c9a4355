"""Checks that Fleet works on this machine: ``python -m fleet.run_check`` or
``fleet.utils.run_check()`` (like ``paddle.utils.run_check()``).

It reports the version and the build (CUDA compiled in, NCCL, GPUs visible, the BLAS library and
its threads), then runs real work on this machine, each part timed:

1. a tiny training step in this process (an fc model, ``Executor.run``);
2. parameter-server training through ``fleetrun --server_num=1 --worker_num=2``, in async and in
   sync mode: a small model with a sparse embedding and a dense layer, rewritten by
   ``fleet.distributed_optimizer``, trained by both workers against the server; the check is that
   the loss of a fixed batch went down and that both workers read the same parameters;
3. a collective job through ``fleetrun --collective --nproc_per_node=2``: both processes
   all-reduce through ``fleet.util.all_reduce``.

The last line says whether Fleet works here; a failing part says what failed and what to check.
Each part is one function in ``CHECKS`` returning what it saw (or raising).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import List, Optional, Sequence, TextIO

import numpy as np

import fleet
from fleet import _core, layers
from fleet.version import __version__

JOB_TIMEOUT_S = 120.0  # one fleetrun job, start to finish
RPC_TIMEOUT_S = 30.0  # connecting to the server, each RPC, each rendezvous

# Run by fleetrun: the job functions below, in the process fleetrun started.
_JOB_SCRIPT = textwrap.dedent("""\
    import sys
    from fleet import run_check
    sys.exit(run_check._JOBS[sys.argv[1]](sys.argv[2]))
    """)


class CheckFailed(Exception):
    """A check's failure, with what to look at."""

    def __init__(self, what: str, hint: str) -> None:
        super().__init__(what)
        self.hint = hint


@dataclasses.dataclass
class CheckResult:
    name: str
    ok: bool
    seconds: float
    detail: str  # what it saw, or what failed
    hint: str = ""  # what to check, for a failure


# ---------------------------------------------------------------------------------------------
# The build


def build_info() -> dict:
    """Version and build: CUDA compiled in, NCCL, visible GPUs, BLAS library and threads."""
    try:
        gpus = _core.cuda_device_count()
    except Exception as e:  # a broken driver is worth reporting, not worth stopping for
        gpus = f"unknown ({e})"
    return {
        "version": __version__,
        "python": sys.version.split()[0],
        "cuda_compiled": bool(_core.compiled_with_cuda),
        "nccl": "compiled in"
        if _core.nccl_compiled()
        else "not compiled in (no CUDA or NCCL at build time)",
        "gpus_visible": gpus,
        "blas_library": _loaded_library("blas", skip=("numpy", "scipy")) or "unknown",
        "blas_threads": _core.blas_threads(),
    }


def _loaded_library(fragment: str, skip: Sequence[str] = ()) -> Optional[str]:
    """Path of the first shared library mapped into this process whose name has `fragment`,
    ignoring paths with any of `skip` (NumPy's own OpenBLAS is not the one Fleet's kernels use)."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            for line in f:
                path = line.split()[-1]
                if (
                    fragment in os.path.basename(path)
                    and ".so" in path
                    and not any(s in path for s in skip)
                ):
                    return path
    except OSError:
        return None
    return None


# ---------------------------------------------------------------------------------------------
# The checks: one function each, returning what it saw or raising


def check_single_process() -> str:
    """A tiny fc classifier, 10 Executor.run steps in this process, in a scope of its own."""
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        x = layers.data("x", [4], dtype="float32")
        label = layers.data("label", [1], dtype="int64")
        prob = layers.fc(layers.fc(x, 8, act="relu"), 2, act="softmax")
        loss = layers.mean(layers.cross_entropy(prob, label))
        fleet.optimizer.SGD(0.5).minimize(loss)
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((64, 4)).astype(np.float32)
    labels = (xs[:, :1] > 0).astype(np.int64)
    with fleet.scope_guard(_core.Scope()):  # leaves the caller's global scope alone
        exe = fleet.Executor(fleet.CPUPlace())
        exe.run(startup)
        losses = [
            exe.run(main, feed={"x": xs, "label": labels}, fetch_list=[loss])[0].item()
            for _ in range(10)
        ]
    if not all(np.isfinite(losses)) or losses[-1] >= losses[0]:
        raise CheckFailed(
            f"the loss did not fall: {losses[0]:.4f} -> {losses[-1]:.4f}",
            "the CPU kernels or the BLAS library misbehave; report it with the build lines above",
        )
    return f"10 steps, loss {losses[0]:.3f} -> {losses[-1]:.3f}"


def _check_ps_training(mode: str) -> str:
    """1 server and 2 workers under fleetrun train a small model in `mode`."""
    with tempfile.TemporaryDirectory(prefix="fleet_run_check_") as tmp:
        _run_job(["--server_num=1", "--worker_num=2"], f"ps_{mode}", Path(tmp))
        seen = _worker_results(Path(tmp), 2)
    first, last = seen[0]["loss_before"], seen[0]["loss_after"]
    if not last < first:
        raise CheckFailed(
            f"{mode} training did not lower the loss of a fixed batch ({first:.4f} -> {last:.4f})",
            "the servers did not apply the workers' gradients; report it with "
            "the build lines above",
        )
    if not np.allclose(seen[0]["dense"], seen[1]["dense"], atol=1e-6):
        raise CheckFailed(
            "the two workers read different dense parameters after training",
            "the servers or the communicator lost updates; report it with the build lines above",
        )
    return f"2 workers, 20 steps each: loss {first:.3f} -> {last:.3f}"


def check_parameter_server_async() -> str:
    return _check_ps_training("async")


def check_parameter_server_sync() -> str:
    return _check_ps_training("sync")


def check_collective() -> str:
    """2 processes under fleetrun --collective; each all-reduces through fleet.util."""
    with tempfile.TemporaryDirectory(prefix="fleet_run_check_") as tmp:
        _run_job(["--collective", "--nproc_per_node=2"], "collective", Path(tmp))
        seen = _worker_results(Path(tmp), 2)
    for rank, result in seen.items():
        if result["sum"] != [3.0] * 4:
            raise CheckFailed(
                f"rank {rank} got {result['sum']}, expected [3.0] * 4",
                "Gloo returned a wrong sum; report it with the build lines above",
            )
    return "2 processes all-reduced through Gloo"


CHECKS: List[tuple] = [
    ("single-process training", check_single_process),
    ("parameter-server training, async: 1 server, 2 workers", check_parameter_server_async),
    ("parameter-server training, sync: 1 server, 2 workers", check_parameter_server_sync),
    ("collective all-reduce: 2 processes", check_collective),
]


# ---------------------------------------------------------------------------------------------
# Running jobs through fleetrun


def _run_job(options: Sequence[str], job: str, workdir: Path) -> None:
    """Runs `job` (a key of _JOBS) under fleetrun with `options`, results under `workdir`."""
    script = workdir / "run_check_job.py"
    script.write_text(_JOB_SCRIPT)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    for name in ("FLEET_GLOO_STORE_PATH", "FLEET_GLOO_STORE_ENDPOINT"):
        env.pop(name, None)  # the job's own rendezvous, not one a caller's environment names
    # The fleet that runs this check, also when it is not installed (a source checkout).
    package_root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    command = [
        sys.executable,
        "-m",
        "fleet.launch",
        "--log_dir",
        str(workdir / "logs"),
        *options,
        str(script),
        job,
        str(workdir),
    ]
    try:
        proc = subprocess.run(
            command,
            capture_output=True,
            text=True,
            env=env,
            cwd=str(workdir),
            timeout=JOB_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise CheckFailed(
            f"fleetrun did not finish within {JOB_TIMEOUT_S:.0f} s",
            "processes could not reach each other: check that this machine lets "
            "processes listen on and connect to 127.0.0.1 ports (firewall, "
            "sandbox) and that it is not overloaded",
        ) from None
    if proc.returncode != 0:
        logs = "\n".join(
            f"{p.name}: {p.read_text(errors='replace')[-1500:]}"
            for p in sorted((workdir / "logs").glob("*log*"))
        )
        output = f"{proc.stderr[-1500:]}\n{logs}"
        raise CheckFailed(
            f"fleetrun exited with {proc.returncode}:\n{output.strip()}", _hint_for(output)
        )


def _worker_results(workdir: Path, workers: int) -> dict:
    results = {}
    for rank in range(workers):
        path = workdir / f"result.{rank}.json"
        if not path.exists():
            raise CheckFailed(
                f"worker {rank} finished without a result",
                "a worker exited early; run the check again to see its log",
            )
        results[rank] = json.loads(path.read_text())
    return results


def _hint_for(output: str) -> str:
    """What to check, from the output of a failed job."""
    text = output.lower()
    if "cannot open shared object" in text or "importerror" in text or "undefined symbol" in text:
        return (
            "a library is missing or does not match: reinstall Fleet, and check "
            "`ldd $(python -c 'import fleet._core as c; print(c.__file__)')`"
        )
    if any(
        s in text
        for s in ("address already in use", "cannot listen", "failed to bind", "permission denied")
    ):
        return (
            "a port could not be opened: check that processes may listen on 127.0.0.1 "
            "(firewall, sandbox, port range)"
        )
    if any(
        s in text for s in ("unavailable", "timed out", "timeout", "connection refused", "connect")
    ):
        return (
            "processes could not reach each other: check that 127.0.0.1 connections between "
            "processes are allowed (firewall, sandbox, a proxy in the environment)"
        )
    return "see the output above"


def _ps_train_job(workdir: str, mode: str) -> int:
    """A parameter-server training job, in a process fleetrun started: an embedding on the
    server and an fc layer; each worker runs 20 steps on its own batches, then (after flushing)
    records the loss of a fixed batch before and after, and the dense parameters it reads."""
    fleet.init()
    main, startup = fleet.Program(), fleet.Program()
    main.random_seed = startup.random_seed = 3
    with fleet.program_guard(main, startup):
        ids = layers.data("ids", [1], dtype="int64", lod_level=1)
        label = layers.data("label", [1], dtype="int64")
        emb = layers.embedding(ids, size=[100, 4], is_sparse=True)
        prob = layers.fc(layers.sequence_pool(emb, "sum"), 2, act="softmax")
        loss = layers.mean(layers.cross_entropy(prob, label))
        factory = fleet.DistributedStrategyFactory
        strategy = (
            factory.create_sync_strategy() if mode == "sync" else factory.create_async_strategy()
        )
        fleet.distributed_optimizer(fleet.optimizer.SGD(0.5), strategy).minimize(loss)
        test = main.clone(for_test=True)
    if fleet.is_server():
        fleet.init_server()
        fleet.run_server()
        return 0
    rank = fleet.worker_index()

    def batch(seed: int) -> dict:
        rng = np.random.default_rng(seed)
        label_ = rng.integers(0, 2, size=(32, 1))
        # Learnable: the id says the label (ids 0-49 for label 0, 50-99 for label 1).
        ids_ = (rng.integers(0, 50, size=(32, 1)) + 50 * label_).astype(np.int64)
        return {"ids": fleet.LoDTensor(ids_, lengths=[[1] * 32]), "label": label_}

    exe = fleet.Executor(fleet.CPUPlace())
    exe.run(fleet.startup_program)
    fleet.init_worker(timeout=RPC_TIMEOUT_S)
    fixed = batch(12345)
    (before,) = exe.run(test, feed=fixed, fetch_list=[loss])
    for step in range(20):
        exe.run(fleet.main_program, feed=batch(1000 * rank + step), fetch_list=[loss])
    fleet.flush_worker()
    fleet.barrier_worker()
    fleet.flush_worker()  # the other worker's last gradients are in: refresh the dense values
    (after,) = exe.run(test, feed=fixed, fetch_list=[loss])
    dense = [
        fleet.global_scope().find_var(p.name).get_tensor().numpy().ravel().tolist()
        for p in fleet.main_program.all_parameters()
    ]
    _record(
        workdir,
        rank,
        {"loss_before": float(before[0]), "loss_after": float(after[0]), "dense": sum(dense, [])},
    )
    fleet.stop_worker(timeout=RPC_TIMEOUT_S)
    return 0


def _collective_job(workdir: str) -> int:
    """The collective job: each rank all-reduces [rank + 1] * 4 and records the sum."""
    fleet.init(is_collective=True)
    rank = fleet.worker_index()
    total = fleet.util.all_reduce(np.full(4, rank + 1.0, np.float32), "sum")
    _record(workdir, rank, {"sum": total.tolist()})
    return 0


def _record(workdir: str, rank: int, result: dict) -> None:
    path = Path(workdir) / f"result.{rank}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, path)


_JOBS: dict = {
    "ps_async": lambda workdir: _ps_train_job(workdir, "async"),
    "ps_sync": lambda workdir: _ps_train_job(workdir, "sync"),
    "collective": _collective_job,
}


# ---------------------------------------------------------------------------------------------
# Running and reporting


def run_checks(checks: Sequence[tuple] = CHECKS) -> List[CheckResult]:
    results = []
    for name, check in checks:
        start = time.perf_counter()
        try:
            detail, ok, hint = check(), True, ""
        except CheckFailed as e:
            detail, ok, hint = str(e), False, e.hint
        except Exception as e:  # any other error is this check's failure, reported below
            detail, ok = f"{type(e).__name__}: {e}", False
            hint = _hint_for(detail)
        results.append(CheckResult(name, ok, time.perf_counter() - start, detail, hint))
    return results


def run_check(stream: Optional[TextIO] = None, checks: Sequence[tuple] = CHECKS) -> bool:
    """Prints the build and the result of each check to `stream` (stdout); True when all
    passed."""
    out = stream or sys.stdout
    try:
        info = build_info()
    except ImportError as e:
        print(
            f"Fleet cannot load its compiled core: {e}\n  check: reinstall Fleet; `ldd` on "
            "fleet/_core*.so names any missing library\nFleet does NOT work here.",
            file=out,
        )
        return False
    print(f"Fleet {info['version']} (Python {info['python']})", file=out)
    print(
        f"  CUDA compiled in: {'yes' if info['cuda_compiled'] else 'no (CPU build)'}; "
        f"GPUs visible: {info['gpus_visible']}; NCCL: {info['nccl']}",
        file=out,
    )
    print(f"  BLAS: {info['blas_library']}, {info['blas_threads']} thread(s)", file=out, flush=True)
    results = []
    for name, check in checks:
        result = run_checks([(name, check)])[0]
        results.append(result)
        status = "ok" if result.ok else "FAILED"
        print(f"[{status:>6}] {name} ({result.seconds:.2f} s): {result.detail}", file=out)
        if not result.ok:
            print(f"         check: {result.hint}", file=out)
        out.flush()
    failed = [r.name for r in results if not r.ok]
    if failed:
        print(f"Fleet does NOT work here: {', '.join(failed)} failed (see above).", file=out)
    else:
        print(
            "Fleet works here: single-process, parameter-server and collective runs all passed.",
            file=out,
        )
    return not failed


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m fleet.run_check", description=__doc__.split("\n\n")[0]
    )
    parser.parse_args(argv)
    return 0 if run_check() else 1


if __name__ == "__main__":
    sys.exit(main())
