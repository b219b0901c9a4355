"""Benchmark: parameter initialisation ops (fill_constant, uniform_random, gaussian_random) on a
[rows, width] float32 table, against PaddlePaddle's static startup program filling the same table
and against NumPy's generators, in the same run.

    .venv/bin/python benchmarks/init_ops.py [--quick] [--rows 1000000] [--width 10]

Each figure is the best of several runs, each into a fresh scope, so memory allocation and first
touch are counted on both sides as in a real startup program. The Paddle peer runs in its own venv
(benchmarks/peers/setup.sh); without it the JSON says so. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from fleet import _core  # noqa: E402
from fleet.proto import framework_pb2 as pb  # noqa: E402
from fleet.testing.op_test import make_op_desc  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEER_PYTHON = os.path.join(ROOT, ".venv-peers", "paddle", "bin", "python")
OPS = {
    "fill_constant": {"value": 0.5},
    "uniform_random": {"min": -0.1, "max": 0.1, "seed": 3},
    "gaussian_random": {"mean": 0.0, "std": 0.1, "seed": 3},
}

PADDLE_PEER = r"""
import json, sys, time
import paddle
paddle.enable_static()
rows, width, reps = (int(a) for a in sys.argv[1:4])
inits = {"fill_constant": paddle.nn.initializer.Constant(0.5),
         "uniform_random": paddle.nn.initializer.Uniform(-0.1, 0.1),
         "gaussian_random": paddle.nn.initializer.Normal(0.0, 0.1)}
result = {}
for name, init in inits.items():
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        paddle.static.create_parameter([rows, width], "float32", default_initializer=init)
    exe = paddle.static.Executor(paddle.CPUPlace())
    best = float("inf")
    for _ in range(reps):
        with paddle.static.scope_guard(paddle.static.Scope()):
            start = time.perf_counter()
            exe.run(startup)
            best = min(best, time.perf_counter() - start)
    result[name] = best
print(json.dumps(result))
"""


def measure_fleet(rows: int, width: int, reps: int) -> dict[str, float]:
    result = {}
    for op_type, attrs in OPS.items():
        program = pb.ProgramDesc()
        block = program.blocks.add(idx=0, parent_idx=-1)
        block.ops.append(
            make_op_desc(op_type, {}, {"Out": ["table"]}, dict(attrs, shape=[rows, width], dtype=0))
        )
        executor = _core.Executor(seed=1)
        prepared = executor.prepare(program.SerializeToString(), 0)
        best = float("inf")
        for _ in range(reps):
            scope = _core.Scope()
            start = time.perf_counter()
            executor.run(prepared, scope, [])
            best = min(best, time.perf_counter() - start)
        result[op_type] = best
    return result


def measure_numpy(rows: int, width: int, reps: int) -> dict[str, float]:
    rng = np.random.default_rng(3)
    makers = {
        "fill_constant": lambda: np.full((rows, width), 0.5, dtype=np.float32),
        "uniform_random": lambda: rng.uniform(-0.1, 0.1, (rows, width)).astype(np.float32),
        "gaussian_random": lambda: rng.standard_normal((rows, width), dtype=np.float32),
    }
    result = {}
    for name, make in makers.items():
        best = float("inf")
        for _ in range(reps):
            start = time.perf_counter()
            make()
            best = min(best, time.perf_counter() - start)
        result[name] = best
    return result


def measure_paddle(rows: int, width: int, reps: int) -> dict[str, float] | str:
    if not os.path.exists(PEER_PYTHON):
        return f"not run: {PEER_PYTHON} is missing (benchmarks/peers/setup.sh installs it)"
    proc = subprocess.run(
        [PEER_PYTHON, "-c", PADDLE_PEER, str(rows), str(width), str(reps)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        return f"failed: {proc.stderr[-500:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a [200k, 10] table, 2 runs")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--width", type=int, default=10)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    rows, reps = (200_000, 2) if args.quick else (args.rows, args.reps)

    fleet_s = measure_fleet(rows, args.width, reps)
    numpy_s = measure_numpy(rows, args.width, reps)
    paddle_s = measure_paddle(rows, args.width, reps)
    report = {
        "benchmark": "init_ops",
        "shape": [rows, args.width],
        "dtype": "float32",
        "runs": reps,
        "fleet_s": fleet_s,
        "numpy_s": numpy_s,
        "paddle_s": paddle_s,
        "speedup_vs_numpy": {k: numpy_s[k] / fleet_s[k] for k in OPS},
    }
    if isinstance(paddle_s, dict):
        report["speedup_vs_paddle"] = {k: paddle_s[k] / fleet_s[k] for k in OPS}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
