"""Benchmark: dense sgd and adam op updates on 400x400 float32 parameters (the fc weights of
CTR-DNN), one thread, in place, against PaddlePaddle 3.3.1's CPU kernels (_C_ops.sgd_ / adam_
in dygraph, in its own venv from benchmarks/peers/setup.sh) and NumPy doing the same formula
with in-place float32 ufuncs, in the same run.

    .venv/bin/python benchmarks/optimizer_ops.py [--quick]

Fleet runs one prepared program of K update ops (one per parameter) through the executor, so
the Python call is amortised over K ops; Paddle makes one dygraph call per parameter, as its
optimizer does. The last line of output is one JSON object; ratios > 1 mean Fleet is faster.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
# FLEET_PADDLE_PYTHON points at another checkout's peer venv (e.g. from a worktree).
PEER_PYTHON = os.environ.get(
    "FLEET_PADDLE_PYTHON", os.path.join(ROOT, ".venv-peers", "paddle", "bin", "python")
)

from fleet import _core  # noqa: E402
from fleet.proto import framework_pb2 as pb  # noqa: E402
from fleet.testing.op_test import make_op_desc  # noqa: E402

SHAPE = (400, 400)
PARAMS = 8


def _fleet_program(op: str) -> tuple[pb.ProgramDesc, list[str]]:
    program = pb.ProgramDesc()
    block = program.blocks.add(idx=0, parent_idx=-1)
    names = []
    for k in range(PARAMS):
        p, g, lr = f"p{k}", f"g{k}", "lr"
        names += [p, g]
        if op == "sgd":
            inputs = {"Param": [p], "Grad": [g], "LearningRate": [lr]}
            outputs = {"ParamOut": [p]}
        else:
            m1, m2, b1, b2 = f"m1_{k}", f"m2_{k}", f"b1_{k}", f"b2_{k}"
            names += [m1, m2, b1, b2]
            inputs = {
                "Param": [p],
                "Grad": [g],
                "LearningRate": [lr],
                "Moment1": [m1],
                "Moment2": [m2],
                "Beta1Pow": [b1],
                "Beta2Pow": [b2],
            }
            outputs = {
                "ParamOut": [p],
                "Moment1Out": [m1],
                "Moment2Out": [m2],
                "Beta1PowOut": [b1],
                "Beta2PowOut": [b2],
            }
        block.ops.append(make_op_desc(op, inputs, outputs, {}))
    return program, names


def measure_fleet(op: str, steps: int) -> float:
    """Microseconds per op update."""
    program, names = _fleet_program(op)
    scope = _core.Scope()
    rng = np.random.default_rng(0)
    for name in names:
        if name.startswith(("b1", "b2")):
            value = np.array([0.9 if name.startswith("b1") else 0.999], np.float32)
        else:
            value = rng.uniform(0.01, 0.1, size=SHAPE).astype(np.float32)
        scope.var(name).get_tensor().set(value)
    scope.var("lr").get_tensor().set(np.array([1e-3], np.float32))
    executor = _core.Executor()
    prepared = executor.prepare(program.SerializeToString(), 0)
    executor.run(prepared, scope, [])  # warm-up: bind, first touch
    start = time.perf_counter()
    for _ in range(steps):
        executor.run(prepared, scope, [])
    return (time.perf_counter() - start) / (steps * PARAMS) * 1e6


def measure_numpy(op: str, steps: int) -> float:
    rng = np.random.default_rng(0)
    arrays = [
        [rng.uniform(0.01, 0.1, size=SHAPE).astype(np.float32) for _ in range(4)]
        for _ in range(PARAMS)
    ]
    tmp = np.empty(SHAPE, np.float32)
    lr, b1, b2, eps = np.float32(1e-3), np.float32(0.9), np.float32(0.999), np.float32(1e-8)

    def update(
        p: np.ndarray, g: np.ndarray, m1: np.ndarray, m2: np.ndarray, tmp: np.ndarray
    ) -> None:
        if op == "sgd":
            np.multiply(g, lr, out=tmp)
            np.subtract(p, tmp, out=p)
            return
        m1 *= b1
        m1 += (1 - b1) * g
        m2 *= b2
        np.multiply(g, g, out=tmp)
        tmp *= 1 - b2
        m2 += tmp
        np.sqrt(m2, out=tmp)
        tmp += eps
        np.divide(m1, tmp, out=tmp)
        tmp *= lr
        p -= tmp

    start = time.perf_counter()
    for _ in range(steps):
        for p, g, m1, m2 in arrays:
            update(p, g, m1, m2, tmp)
    return (time.perf_counter() - start) / (steps * PARAMS) * 1e6


PEER_SCRIPT = r"""
import json, sys, time
import numpy as np
import paddle
from paddle import _C_ops
paddle.set_device("cpu")
op, steps, params, shape = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), (400, 400)
rng = np.random.default_rng(0)
t = lambda a: paddle.to_tensor(a)
vals = [[t(rng.uniform(0.01, 0.1, size=shape).astype(np.float32)) for _ in range(4)]
        for _ in range(params)]
pows = [[t(np.array([0.9], np.float32)), t(np.array([0.999], np.float32))] for _ in range(params)]
lr = t(np.array([1e-3], np.float32))
def step():
    for (p, g, m1, m2), (b1, b2) in zip(vals, pows):
        if op == "sgd":
            _C_ops.sgd_(p, lr, g, None, False)
        else:
            _C_ops.adam_(p, g, lr, m1, m2, None, b1, b2, None, None, 0.9, 0.999, 1e-8, False,
                         1000, False, False, False)
step()
start = time.perf_counter()
for _ in range(steps):
    step()
print(json.dumps({"us_per_update": (time.perf_counter() - start) / (steps * params) * 1e6,
                  "version": paddle.__version__}))
"""


def measure_paddle(op: str, steps: int) -> dict:
    if not os.path.exists(PEER_PYTHON):
        return {"skipped": "no peer venv; run benchmarks/peers/setup.sh"}
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    proc = subprocess.run(
        [PEER_PYTHON, "-c", PEER_SCRIPT, op, str(steps), str(PARAMS)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps (under a minute)")
    args = parser.parse_args()
    steps = 50 if args.quick else 500
    result: dict = {
        "benchmark": "optimizer_ops",
        "quick": args.quick,
        "shape": list(SHAPE),
        "params": PARAMS,
        "steps": steps,
        "threads": 1,
    }
    for op in ("sgd", "adam"):
        ours = measure_fleet(op, steps)
        numpy_us = measure_numpy(op, steps)
        peer = measure_paddle(op, steps)
        peer_us = peer.get("us_per_update")
        result[op] = {
            "fleet_us": round(ours, 2),
            "numpy_us": round(numpy_us, 2),
            "paddle": peer,
            "ratio_vs_numpy": round(numpy_us / ours, 2),
            "ratio_vs_paddle": round(peer_us / ours, 2) if peer_us else None,
        }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
