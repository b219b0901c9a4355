"""Benchmark: checkpoint save and load of a sparse table (10M rows x dim 8 with Adagrad state:
16 floats a row plus its int64 key, 72 bytes), base and delta with 1% of the rows changed,
against PaddlePaddle 2.6.2's own save and load of a table of the same rows and dim, and against
the same bytes written with numpy.save and read with numpy.load, in the same run.

    .venv/bin/python benchmarks/ps_checkpoint.py [--quick] [--rounds 3] [--rows 10000000]

Fleet: the table lives in a parameter server in this process; saves and loads go through
PsClient (the checkpoint path a job uses: part files with CRC-32, manifest committed last,
fsync'd). load_s is a restore: a fresh server (empty tables) loads the checkpoint, as a job does
when it starts from one, checking each part's CRC as its records load. reload_s loads into the
server that holds the table, which checks every part whole before it drops any row (an extra
pass).
Paddle (benchmarks/peers/paddle_ps_checkpoint.py in .venv-peers/paddle26): a job of one server
and one worker fills a MemorySparseTable (SparseAccessor, Adagrad rule) with the same number of
rows of the same dim and times fleet.save_persistables (mode 0, every row); a second job, with an
empty table, times fleet.load_model(mode=0). Its part files are gzip'd text, as Paddle writes
them. The figures are the times of those calls (Paddle's job start and fill are not counted);
after each, the server's table must hold every row (the worker logs its count), else the round's
Paddle side is reported failed.
NumPy: one array of the same 72-byte records ([rows] of key + 16 floats) with numpy.save plus an
fsync (the checkpoint fsyncs too), read back with numpy.load: the physical limit of streaming the
bytes. A table load does more than read them: it checks each part's CRC-32 and inserts every row
into the table's hash index, which numpy.load does not.

The machine may be shared: the Fleet side (Fleet and NumPy) and the Paddle side take turns for
--rounds rounds (the order alternates each round; benchmarks/rounds.py); within a side each
timed operation repeats until --min_seconds have passed (at least --reps times) and counts its
median. Each side's figure is the median over the rounds; every round is in the JSON with the
load average before and after each side, and a warning goes to stderr when it is above 2. The
page cache is warm for all three (no root to drop it), so the ratios compare the software paths.
The last line is one JSON object: save_vs_paddle and load_vs_paddle (Paddle's seconds over
Fleet's for the same table; target >= 5), save_vs_numpy (Fleet's MB/s over NumPy's; target
>= 0.8), load_vs_numpy (as it is: a checked restore builds the index), delta_bytes_ratio (delta
part bytes over base part bytes at 1% changed rows; target <= 0.02).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import time

import numpy as np

from fleet.ps import PsClient, server_config, start_server
from fleet.ps.checkpoint import read_manifest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from job_runner import paddle_ps_launch, run_in_session, tail  # noqa: E402
from rounds import alternate, max_load, medians  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEER_PYTHON = os.path.join(ROOT, ".venv-peers", "paddle26", "bin", "python")
PEER_SCRIPT = os.path.join(ROOT, "benchmarks", "peers", "paddle_ps_checkpoint.py")
PEER_TIMEOUT_S = 3600
DIM = 8
TABLE = {
    "table_id": 1,
    "name": "emb",
    "type": "SPARSE",
    "dim": DIM,
    "optimizer": {"learning_rate": 0.05, "adagrad": {}},
    "initializer": {"seed": 1, "uniform": {"low": -0.01, "high": 0.01}},
}
CHUNK = 1 << 20
MAX_REPEATS = 50


def _fill(client: PsClient, keys: np.ndarray) -> None:
    """Creates every row and gives it Adagrad state (one push of a gradient)."""
    grads = np.full((CHUNK, DIM), 0.01, np.float32)
    for start in range(0, keys.size, CHUNK):
        part = keys[start : start + CHUNK]
        client.push_sparse(1, part, grads[: part.size])


def _part_bytes(dirname: str, save_index: int) -> int:
    table = read_manifest(dirname).tables[0]
    return sum(f.bytes for f in table.saves[save_index].files)


def _repeat(measure, args: argparse.Namespace) -> float:
    """The median of `measure()` (it returns the seconds of one timed operation), called until
    at least args.reps calls and args.min_seconds of timed operations."""
    times: list[float] = []
    while len(times) < MAX_REPEATS and (len(times) < args.reps or sum(times) < args.min_seconds):
        times.append(measure())
    return statistics.median(times)


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _fresh_load(ckpt: str) -> float:
    """Seconds of one restore into a fresh server (its start and stop not counted)."""
    server = start_server(server_config(0, 1, [TABLE]))
    try:
        with PsClient([server.endpoint], admin_timeout=3600) as client:
            return _timed(lambda: client.load(ckpt))
    finally:
        server.shutdown(1.0)


def fleet_side(args: argparse.Namespace, keys: np.ndarray) -> dict:
    """Fleet's save, restore, reload and delta save, and NumPy's save and load, of one table."""
    ckpt, npy = os.path.join(args.dir, "ckpt"), os.path.join(args.dir, "peer.npy")
    shutil.rmtree(ckpt, ignore_errors=True)
    server = start_server(server_config(0, 1, [TABLE]))
    try:
        with PsClient([server.endpoint], admin_timeout=3600) as client:
            _fill(client, keys)
            client.save(ckpt)  # warm-up: the files exist, as for NumPy's
            save_s = _repeat(lambda: _timed(lambda: client.save(ckpt)), args)
            base_bytes = _part_bytes(ckpt, 0)
            reload_s = _repeat(lambda: _timed(lambda: client.load(ckpt)), args)
    finally:
        server.shutdown(1.0)
    load_s = _repeat(lambda: _fresh_load(ckpt), args)
    server = start_server(server_config(0, 1, [TABLE]))
    try:
        with PsClient([server.endpoint], admin_timeout=3600) as client:
            client.load(ckpt)
            changed = keys[: max(1, keys.size // 100)]
            client.push_sparse(1, changed, np.full((changed.size, DIM), 0.01, np.float32))
            delta_s = _timed(lambda: client.save(ckpt, delta=True))
            delta_bytes = _part_bytes(ckpt, 1)
    finally:
        server.shutdown(1.0)
    shutil.rmtree(ckpt, ignore_errors=True)

    record = np.dtype([("key", "<i8"), ("data", "<f4", (2 * DIM,))])
    records = np.zeros(keys.size, dtype=record)
    records["key"] = keys

    def numpy_save() -> None:
        with open(npy, "wb") as f:
            np.save(f, records)
            f.flush()
            os.fsync(f.fileno())

    numpy_save()
    np_save_s = _repeat(lambda: _timed(numpy_save), args)
    np_load_s = _repeat(lambda: _timed(lambda: np.load(npy)), args)
    np_bytes = os.path.getsize(npy)
    os.remove(npy)
    return {
        "base_bytes": base_bytes,
        "numpy_bytes": np_bytes,
        "save_s": save_s,
        "load_s": load_s,
        "reload_s": reload_s,
        "numpy_save_s": np_save_s,
        "numpy_load_s": np_load_s,
        "delta_rows": int(changed.size),
        "delta_bytes": delta_bytes,
        "delta_save_s": delta_s,
    }


def _peer_job(args: argparse.Namespace, phase: str, ckpt: str) -> dict:
    """One Paddle job (1 server, 1 worker) of `phase`; its worker's JSON, or {"failed": why}."""
    out_dir = os.path.join(args.dir, f"paddle_{phase}")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    out = os.path.join(out_dir, "worker.json")
    script_args = [
        PEER_SCRIPT,
        "--phase",
        phase,
        "--rows",
        str(args.rows),
        "--dim",
        str(DIM),
        "--dir",
        ckpt,
        "--out",
        out,
        "--min_seconds",
        str(args.min_seconds),
    ]
    command = paddle_ps_launch(PEER_PYTHON, 1, os.path.join(out_dir, "log"), script_args)
    env = dict(os.environ, PADDLE_WITH_GLOO="1")
    env.pop("PYTHONPATH", None)
    launcher_log = os.path.join(out_dir, "launcher.log")
    # In the scratch folder: Paddle writes its prototxt files into the cwd.
    rc, _ = run_in_session(command, launcher_log, env, out_dir, PEER_TIMEOUT_S)
    worker_log = tail(os.path.join(out_dir, "log", "workerlog.0"), 10**6)
    if rc != 0 or not os.path.exists(out):
        logs = worker_log[-1500:] + tail(launcher_log, 500)
        return {"failed": f"paddle {phase} job: exit {rc}, no result\n{logs}"}
    held = re.findall(r"feasign size: (\d+)", worker_log)
    if not held or int(held[-1]) != args.rows:
        return {"failed": f"paddle {phase} job: the table holds {held[-1:]} rows, not {args.rows}"}
    with open(out) as f:
        return json.load(f)


def paddle_side(args: argparse.Namespace) -> dict:
    """Paddle 2.6.2's save (a job that fills the table) and restore (a job with an empty one)."""
    ckpt = os.path.join(args.dir, "paddle_ckpt")
    shutil.rmtree(ckpt, ignore_errors=True)
    save = _peer_job(args, "save", ckpt)
    if "failed" in save:
        return save
    load = _peer_job(args, "load", ckpt)
    shutil.rmtree(ckpt, ignore_errors=True)
    if "failed" in load:
        return load
    return {
        "save_s": statistics.median(save["save_s"]),
        "load_s": load["load_s"],
        "bytes": save["bytes"],
        "fill_s": save["fill_s"],
        "version": save["paddle_version"],
    }


def summarise(args: argparse.Namespace, fleet: list[dict], paddle: list[dict]) -> dict:
    mb = 1e6
    f = medians(fleet, [k for k in fleet[0] if isinstance(fleet[0][k], float)])
    base, np_bytes = fleet[0]["base_bytes"], fleet[0]["numpy_bytes"]
    result = {
        "benchmark": "ps_checkpoint",
        "quick": args.quick,
        "rows": args.rows,
        "dim": DIM,
        "rule": "adagrad",
        "rounds": args.rounds,
        "min_seconds": args.min_seconds,
        "base_bytes": base,
        "numpy_bytes": np_bytes,
        "save_s": round(f["save_s"], 3),
        "load_s": round(f["load_s"], 3),
        "reload_s": round(f["reload_s"], 3),
        "save_mb_per_s": round(base / mb / f["save_s"], 1),
        "load_mb_per_s": round(base / mb / f["load_s"], 1),
        "numpy_save_mb_per_s": round(np_bytes / mb / f["numpy_save_s"], 1),
        "numpy_load_mb_per_s": round(np_bytes / mb / f["numpy_load_s"], 1),
        "save_vs_numpy": round((base / f["save_s"]) / (np_bytes / f["numpy_save_s"]), 3),
        "load_vs_numpy": round((base / f["load_s"]) / (np_bytes / f["numpy_load_s"]), 3),
        "reload_vs_numpy": round((base / f["reload_s"]) / (np_bytes / f["numpy_load_s"]), 3),
        "delta_rows": fleet[0]["delta_rows"],
        "delta_bytes": fleet[0]["delta_bytes"],
        "delta_save_s": round(f["delta_save_s"], 3),
        "delta_bytes_ratio": round(fleet[0]["delta_bytes"] / base, 5),
    }
    ok = [p for p in paddle if "failed" not in p]
    if ok:
        p = medians(ok, ("save_s", "load_s"))
        p_save, p_load = p["save_s"], p["load_s"]
        result["paddle"] = {
            "version": ok[0]["version"],
            "bytes": ok[0]["bytes"],
            "save_s": round(p_save, 3),
            "load_s": round(p_load, 3),
        }
        result["save_vs_paddle"] = round(p_save / f["save_s"], 2)
        result["load_vs_paddle"] = round(p_load / f["load_s"], 2)
    if len(ok) < len(paddle):
        result["paddle_failed"] = [p["failed"].splitlines()[0] for p in paddle if "failed" in p]
    result["every_round"] = {"fleet": fleet, "paddle": paddle}
    result["max_loadavg_1min"] = max_load(fleet + paddle)
    result["targets"] = {
        "save_vs_paddle": ">= 5",
        "load_vs_paddle": ">= 5",
        "save_vs_numpy": ">= 0.8",
        "delta_bytes_ratio": "<= 0.02",
    }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1M rows, 1 round")
    parser.add_argument("--rows", type=int, default=0, help="table rows (default 10M; 1M quick)")
    parser.add_argument("--rounds", type=int, default=0, help="rounds (default 3; 1 quick)")
    parser.add_argument("--reps", type=int, default=3, help="least runs of each timed operation")
    parser.add_argument(
        "--min_seconds",
        type=float,
        default=10.0,
        help="each timed operation repeats until this many seconds (at most 50 runs)",
    )
    parser.add_argument("--no_paddle", action="store_true", help="skip the Paddle side")
    parser.add_argument("--dir", default="/tmp/fleet_ps_checkpoint_bench")
    args = parser.parse_args()
    args.rows = args.rows or (1_000_000 if args.quick else 10_000_000)
    args.rounds = args.rounds or (1 if args.quick else 3)
    if not args.no_paddle and not os.path.exists(PEER_PYTHON):
        parser.error(f"{PEER_PYTHON} is missing (bash benchmarks/peers/setup.sh 2.6.2)")
    shutil.rmtree(args.dir, ignore_errors=True)
    os.makedirs(args.dir)
    # Distinct raw ids spread over the int64 range (an odd multiplier is a bijection mod 2^64).
    with np.errstate(over="ignore"):
        keys = (np.arange(args.rows, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)).view(
            np.int64
        )
    sides = {"fleet": lambda: fleet_side(args, keys)}
    if not args.no_paddle:
        sides["paddle"] = lambda: paddle_side(args)
    runs = alternate(args.rounds, sides)
    shutil.rmtree(args.dir, ignore_errors=True)
    print(json.dumps(summarise(args, runs["fleet"], runs.get("paddle", []))))


if __name__ == "__main__":
    main()
