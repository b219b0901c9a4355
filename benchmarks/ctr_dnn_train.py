"""Benchmark: CTR-DNN training throughput, one process, one thread, batch 512, against
PaddlePaddle 3.3.1's static graph on the same data in the same run.

    .venv/bin/python benchmarks/ctr_dnn_train.py [--quick]

Data comes from examples/ctr_dnn/generate_data.py. Both sides train the "fused" layout (one
[N, 26] lookup, the same math as 26 one-id slots); Fleet's PaddleRec-style per-slot layout is
measured too. The time split (forward, backward, optimizer, feed) comes from the executor's
per-role op timers; "feed" is everything outside ops (batch slicing, NumPy conversion, feed and
fetch). The peer runs in its own venv (benchmarks/peers/setup.sh); without it the JSON says so.

The GEMM bound: the same process also times the step's GEMMs alone (the forward and backward
products of every mul op, at the batch's shapes, through the same BLAS on one thread, each with
its own operands), before and after the timed steps. `gemm_limit_fraction` is the step's
samples/s over the samples/s those GEMMs alone allow: 1.0 would mean the step costs nothing but
its GEMMs; the rest of the step (elementwise ops, the embedding, the loss, the optimizer, the
executor and the feed) is what keeps it below.
The last line of output is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "ctr_dnn")
PEER_PYTHON = os.path.join(ROOT, ".venv-peers", "paddle", "bin", "python")
sys.path.insert(0, EXAMPLE)

import criteo_reader  # noqa: E402
import model  # noqa: E402

import fleet  # noqa: E402


def generate(out: str, rows: int, test_rows: int) -> tuple[str, str]:
    if not os.path.isfile(os.path.join(out, "oracle.json")):
        subprocess.run(
            [
                sys.executable,
                os.path.join(EXAMPLE, "generate_data.py"),
                "--out",
                out,
                "--train_rows",
                str(rows),
                "--test_rows",
                str(test_rows),
                "--seed",
                "3",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return os.path.join(out, "train.txt"), os.path.join(out, "test.txt")


def _flat(shape: list[int], begin: int, end: int, batch: int) -> int:
    size = 1
    for dim in shape[begin:end]:
        size *= batch if dim < 0 else dim
    return size


def step_gemm_shapes(program: fleet.Program, batch: int) -> list[tuple[bool, bool, int, int, int]]:
    """The (trans_a, trans_b, m, n, k) of every GEMM one step of `program` runs: mul's product
    and mul_grad's X@GRAD and Y@GRAD products, as csrc/operators/matmul_ops.cc calls them, with
    the batch dimension (-1) set to `batch`."""
    block = program.global_block()
    shapes = []
    for op in block.ops:
        if op.type not in ("mul", "mul_grad"):
            continue
        x = list(block.var(op.input("X")[0]).shape)
        y = list(block.var(op.input("Y")[0]).shape)
        xnc = op.attrs.get("x_num_col_dims", 1)
        ync = op.attrs.get("y_num_col_dims", 1)
        m, k = _flat(x, 0, xnc, batch), _flat(x, xnc, len(x), batch)
        n = _flat(y, ync, len(y), batch)
        if op.type == "mul":
            shapes.append((False, False, m, n, k))
            continue
        if op.output("X@GRAD"):
            shapes.append((False, True, m, k, n))
        if op.output("Y@GRAD"):
            shapes.append((True, False, k, n, m))
    return shapes


def measure_fleet(train_file: str, layout: str, batches: int, warmup: int) -> dict:
    fleet._core.set_blas_threads(1)
    data = criteo_reader.read_criteo(train_file)
    net = model.build(model.ModelConfig(layout=layout))
    exe = fleet.Executor(fleet.CPUPlace())
    exe.run(net.startup)
    batch_list = list(criteo_reader.iterate_batches(data, 512, drop_last=True))
    if len(batch_list) < warmup + batches:
        raise SystemExit(f"need {warmup + batches} batches of 512, the data has {len(batch_list)}")
    for batch in batch_list[:warmup]:
        exe.run(
            net.main, feed=net.feed(batch.dense, batch.sparse, batch.label), fetch_list=[net.loss]
        )
    gemm_before = fleet._core.time_gemms(step_gemm_shapes(net.main, 512), batches)
    exe.enable_profiling()
    exe.reset_profile()
    start = time.perf_counter()
    for batch in batch_list[warmup : warmup + batches]:
        exe.run(
            net.main, feed=net.feed(batch.dense, batch.sparse, batch.label), fetch_list=[net.loss]
        )
    wall = time.perf_counter() - start
    gemms = step_gemm_shapes(net.main, 512)
    gemm_s = (gemm_before + fleet._core.time_gemms(gemms, batches)) / 2
    prof = exe.profile()
    ops = prof["forward_s"] + prof["backward_s"] + prof["optimize_s"]
    samples_per_sec = batches * 512 / wall
    return {
        "samples_per_sec": samples_per_sec,
        "gemm_only_samples_per_sec": 512 / gemm_s,
        "gemm_limit_fraction": samples_per_sec * gemm_s / 512,
        "gemms_per_step": len(gemms),
        "seconds": wall,
        "split_s": {
            "forward": prof["forward_s"],
            "backward": prof["backward_s"],
            "optimizer": prof["optimize_s"],
            "feed": wall - ops,
        },
    }


def measure_paddle(train_file: str, test_file: str, batches: int, warmup: int) -> dict:
    if not os.path.exists(PEER_PYTHON):
        return {"skipped": "PaddlePaddle peer not installed (run bash benchmarks/peers/setup.sh)"}
    cmd = [
        PEER_PYTHON,
        os.path.join(ROOT, "benchmarks", "peers", "paddle_ctr_dnn.py"),
        "--train",
        train_file,
        "--test",
        test_file,
        "--epochs",
        "1",
        "--json",
        "--max_batches",
        str(warmup + batches),
        "--warmup_batches",
        str(warmup),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return {"skipped": f"peer failed (exit {proc.returncode}): {proc.stderr[-400:]}"}
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"samples_per_sec": result["samples_per_sec"], "version": result.get("paddle_version")}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer batches, within a minute")
    parser.add_argument(
        "--data_dir", default=os.path.join(tempfile.gettempdir(), "fleet_bench_ctr")
    )
    args = parser.parse_args()
    batches, warmup = (40, 5) if args.quick else (300, 20)
    rows = (batches + warmup + 5) * 512
    train_file, test_file = generate(f"{args.data_dir}_{rows}", rows, 2048)
    ours = measure_fleet(train_file, "fused", batches, warmup)
    ours_slots = measure_fleet(train_file, "slots", batches, warmup)
    peer = measure_paddle(train_file, test_file, batches, warmup)
    result = {
        "benchmark": "ctr_dnn_train",
        "quick": args.quick,
        "batch_size": 512,
        "threads": 1,
        "batches_timed": batches,
        "fleet": ours,
        "fleet_per_slot_layout": ours_slots,
        "paddle": peer,
        "ratio_vs_paddle": (
            ours["samples_per_sec"] / peer["samples_per_sec"] if "samples_per_sec" in peer else None
        ),
        "gemm_limit_fraction": ours["gemm_limit_fraction"],
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
