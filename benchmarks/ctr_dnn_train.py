"""Benchmark: CTR-DNN training throughput, one process, one thread, batch 512, against
PaddlePaddle 3.3.1's static graph on the same data in the same run.

    .venv/bin/python benchmarks/ctr_dnn_train.py [--quick]

Data comes from examples/ctr_dnn/generate_data.py. Both sides train the "fused" layout (one
[N, 26] lookup, the same math as 26 one-id slots); Fleet's PaddleRec-style per-slot layout is
measured too. The time split (forward, backward, optimizer, feed) comes from the executor's
per-role op timers; "feed" is everything outside ops (batch slicing, NumPy conversion, feed and
fetch). The peer runs in its own venv (benchmarks/peers/setup.sh); without it the JSON says so.
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
    exe.enable_profiling()
    exe.reset_profile()
    start = time.perf_counter()
    for batch in batch_list[warmup : warmup + batches]:
        exe.run(
            net.main, feed=net.feed(batch.dense, batch.sparse, batch.label), fetch_list=[net.loss]
        )
    wall = time.perf_counter() - start
    prof = exe.profile()
    ops = prof["forward_s"] + prof["backward_s"] + prof["optimize_s"]
    return {
        "samples_per_sec": batches * 512 / wall,
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
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
