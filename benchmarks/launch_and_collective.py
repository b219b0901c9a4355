"""Benchmark: fleetrun start-up and fleet.util.all_reduce against raw Gloo, in the same run.

    PYTHONPATH=. python benchmarks/launch_and_collective.py [--quick]

startup_s: wall time from starting `python -m fleet.launch --server_num=2 --worker_num=2` to the
moment the last of its 4 processes is ready (fleet.init() done; for workers, the Gloo worker group
connected by fleet.barrier_worker()). Median over repeats. Target: under 2 s.

allreduce: float32 sum across 2 worker processes of a fleetrun collective job on 127.0.0.1, for
4 KB .. 64 MB. Fleet's side is fleet.util.all_reduce (NumPy in, a new NumPy array out). The peer,
the limit, is gloo::allreduce called straight from C++ in a loop (in place, Gloo's default ring)
on a Gloo group of its own in the same processes (fleet_bench.RawGlooGroup, benchmarks/native:
Gloo's file store for the rendezvous, Gloo's TCP transport on 127.0.0.1 as fleet.util's group):
no Fleet code, NumPy or Python in its loop. The two sides alternate in timed blocks (10 quick,
30 full) so that load from other programs on the machine hits both alike; each side's figure
is its median block (the best block is reported too). allreduce_vs_gloo = Gloo time / Fleet
time, the worst over sizes >= 1 MB (1.0: Fleet reaches the raw Gloo limit; target >= 0.9).
The last line of output is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZES = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]

STARTUP_SCRIPT = textwrap.dedent("""\
    import os, sys, time
    from fleet import fleet_api as fleet
    fleet.init()
    if fleet.is_worker():
        fleet.barrier_worker()
    name = f"{'server' if fleet.is_server() else 'worker'}.{os.environ.get('PADDLE_PORT')}"
    with open(os.path.join(sys.argv[1], name), "w") as f:
        f.write(repr(time.time()))
    if fleet.is_server():
        while True:
            time.sleep(0.1)
    """)

ALLREDUCE_SCRIPT = textwrap.dedent("""\
    import json, sys, time
    import numpy as np
    from fleet import fleet_api as fleet
    fleet.init(is_collective=True)
    from fleet_bench import RawGlooGroup
    sizes, repeats, store_dir = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    raw = RawGlooGroup(store_dir, fleet.worker_index(), fleet.worker_num())
    results = []
    for nbytes, iters in sizes:
        x = np.ones(nbytes // 4, np.float32)
        raw_buffer = np.ones(nbytes // 4, np.float32)
        fleet.util.all_reduce(x)
        raw.all_reduce_seconds(raw_buffer, 1)
        fleet_s, gloo_s = [], []
        for _ in range(repeats):  # alternate so that load from elsewhere hits both sides
            fleet.util.barrier()
            start = time.perf_counter()
            for _ in range(iters):
                fleet.util.all_reduce(x)
            fleet_s.append((time.perf_counter() - start) / iters)
            fleet.util.barrier()
            gloo_s.append(raw.all_reduce_seconds(raw_buffer, iters))
        results.append([nbytes, sorted(fleet_s), sorted(gloo_s)])
    if fleet.is_first_worker():
        print("RESULT " + json.dumps(results), flush=True)
    """)


def iterations(nbytes: int, quick: bool) -> int:
    """Calls per timed block: about 8 MB (quick) or 32 MB of all-reduce, 1 to 50 calls."""
    budget = (8 if quick else 32) << 20
    return max(1, min(50, budget // nbytes))


def run_env() -> dict[str, str]:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    # The repository for fleet, benchmarks/ for fleet_bench (the raw Gloo peer).
    env["PYTHONPATH"] = os.pathsep.join(
        [ROOT, os.path.join(ROOT, "benchmarks"), env.get("PYTHONPATH", "")]
    )
    return env


def measure_startup(workdir: str, repeats: int) -> list[float]:
    script = os.path.join(workdir, "startup.py")
    with open(script, "w") as f:
        f.write(STARTUP_SCRIPT)
    times = []
    for i in range(repeats):
        ready_dir = os.path.join(workdir, f"ready{i}")
        os.makedirs(ready_dir)
        start = time.time()
        launcher = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "fleet.launch",
                "--server_num=2",
                "--worker_num=2",
                script,
                ready_dir,
            ],
            env=run_env(),
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            _, stderr = launcher.communicate(timeout=60)  # exits once both workers are done
        finally:
            if launcher.poll() is None:
                launcher.kill()
        stamps = [float(open(os.path.join(ready_dir, n)).read()) for n in os.listdir(ready_dir)]
        if launcher.returncode != 0 or len(stamps) != 4:
            raise SystemExit(
                f"start-up run {i}: fleetrun exited {launcher.returncode} with "
                f"{len(stamps)} of 4 processes ready:\n{stderr[-3000:]}"
            )
        times.append(max(stamps) - start)
    return times


def measure_allreduce(workdir: str, plan: list[list[int]], repeats: int) -> list[list[float]]:
    script = os.path.join(workdir, "allreduce.py")
    store_dir = os.path.join(workdir, "raw_gloo_store")  # the raw Gloo group's rendezvous
    os.makedirs(store_dir)
    with open(script, "w") as f:
        f.write(ALLREDUCE_SCRIPT)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "fleet.launch",
            "--collective",
            "--nproc_per_node=2",
            script,
            json.dumps(plan),
            str(repeats),
            store_dir,
        ],
        env=run_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [ln for ln in out.stdout.splitlines() if "RESULT " in ln]
    if out.returncode != 0 or not lines:
        raise SystemExit(f"all-reduce job failed:\n{out.stderr[-3000:]}")
    return json.loads(lines[0].split("RESULT ", 1)[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats and iterations")
    args = parser.parse_args()
    repeats = 10 if args.quick else 30
    plan = [[b, iterations(b, args.quick)] for b in SIZES]
    with tempfile.TemporaryDirectory(prefix="fleet_bench_") as workdir:
        startups = measure_startup(workdir, 3 if args.quick else 5)
        measured = measure_allreduce(workdir, plan, repeats)
    rows = []
    for b, fleet_blocks, gloo_blocks in measured:
        fleet_s, gloo_s = statistics.median(fleet_blocks), statistics.median(gloo_blocks)
        rows.append(
            {
                "bytes": b,
                "fleet_us": round(fleet_s * 1e6, 1),
                "gloo_us": round(gloo_s * 1e6, 1),
                "fleet_best_us": round(fleet_blocks[0] * 1e6, 1),
                "gloo_best_us": round(gloo_blocks[0] * 1e6, 1),
                "fleet_GBps": round(b / fleet_s / 1e9, 3),
                "gloo_GBps": round(b / gloo_s / 1e9, 3),
                "gloo_over_fleet": round(gloo_s / fleet_s, 3),
            }
        )
        print(
            f"{b:>10} B  fleet {rows[-1]['fleet_us']:>10.1f} us  gloo "
            f"{rows[-1]['gloo_us']:>10.1f} us  ratio {rows[-1]['gloo_over_fleet']:.3f}"
        )
    large = [r["gloo_over_fleet"] for r in rows if r["bytes"] >= 1 << 20]
    result = {
        "benchmark": "launch_and_collective",
        "quick": args.quick,
        "startup_s": round(statistics.median(startups), 3),
        "startup_runs_s": [round(t, 3) for t in startups],
        "allreduce_vs_gloo": round(min(large), 3),
        "allreduce_vs_gloo_mean": round(statistics.mean(large), 3),
        "allreduce": rows,
        "targets": {"startup_s": "< 2", "allreduce_vs_gloo": ">= 0.9 (sizes >= 1 MB)"},
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
