"""Benchmark: checkpoint save and load of a sparse table (10M rows x dim 8 with Adagrad state:
16 floats a row plus its int64 key, 72 bytes), base and delta with 1% of the rows changed,
against the same bytes written with numpy.save and read with numpy.load in the same run.

    .venv/bin/python benchmarks/ps_checkpoint.py [--quick] [--rows 10000000] [--dir /tmp/ps_ckpt]

The table lives in a parameter server in this process; saves and loads go through PsClient
(the checkpoint path a job uses: part files with CRC-32, manifest committed last, fsync'd).
load_s is a restore: a fresh server (empty tables) loads the checkpoint, as a job does when it
starts from one, checking each part's CRC as its records load. reload_s loads into the server
that holds the table, which checks every part whole before it drops any row (an extra pass).
The NumPy peer writes one array of the same 72-byte records ([rows] of key + 16 floats) with
numpy.save plus an fsync (the checkpoint fsyncs too), and reads it back with numpy.load: the
physical limit of streaming the bytes. A table load does more than read them: it checks each
part's CRC-32 and inserts every row into the table's hash index, which numpy.load does not.
Each figure is the best of --reps runs. The page cache is warm for both (no root to drop it),
so the ratios compare the software paths. The last line is
one JSON object: save_vs_numpy and load_vs_numpy (Fleet's MB/s over NumPy's; target >= 0.8) and
delta_bytes_ratio (delta part bytes over base part bytes at 1% changed rows; target <= 0.02).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time

import numpy as np

from fleet.ps import PsClient, server_config, start_server
from fleet.ps.checkpoint import read_manifest

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


def _fill(client: PsClient, keys: np.ndarray) -> None:
    """Creates every row and gives it Adagrad state (one push of a gradient)."""
    grads = np.full((CHUNK, DIM), 0.01, np.float32)
    for start in range(0, keys.size, CHUNK):
        part = keys[start : start + CHUNK]
        client.push_sparse(1, part, grads[: part.size])


def _part_bytes(dirname: str, save_index: int) -> int:
    table = read_manifest(dirname).tables[0]
    return sum(f.bytes for f in table.saves[save_index].files)


def _best(fn, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="the same measurements on 1M rows, 2 runs each"
    )
    parser.add_argument("--rows", type=int, default=0, help="table rows (default 10M; 1M quick)")
    parser.add_argument("--reps", type=int, default=0, help="runs per figure (default 3; 2 quick)")
    parser.add_argument("--dir", default="/tmp/fleet_ps_checkpoint_bench")
    args = parser.parse_args()
    args.rows = args.rows or (1_000_000 if args.quick else 10_000_000)
    args.reps = args.reps or (2 if args.quick else 3)
    shutil.rmtree(args.dir, ignore_errors=True)
    os.makedirs(args.dir)
    ckpt, npy = os.path.join(args.dir, "ckpt"), os.path.join(args.dir, "peer.npy")
    # Distinct raw ids spread over the int64 range (an odd multiplier is a bijection mod 2^64).
    with np.errstate(over="ignore"):
        keys = (np.arange(args.rows, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)).view(
            np.int64
        )

    server = start_server(server_config(0, 1, [TABLE]))
    try:
        with PsClient([server.endpoint], admin_timeout=3600) as client:
            _fill(client, keys)
            client.save(ckpt)  # warm-up: the files exist, as for NumPy's
            save_s = _best(lambda: client.save(ckpt), args.reps)
            base_bytes = _part_bytes(ckpt, 0)
            reload_s = _best(lambda: client.load(ckpt), args.reps)
    finally:
        server.shutdown(1.0)
    load_s = float("inf")
    for _ in range(args.reps):
        server = start_server(server_config(0, 1, [TABLE]))
        with PsClient([server.endpoint], admin_timeout=3600) as client:
            start = time.perf_counter()
            client.load(ckpt)
            load_s = min(load_s, time.perf_counter() - start)
        server.shutdown(1.0)
    server = start_server(server_config(0, 1, [TABLE]))
    try:
        with PsClient([server.endpoint], admin_timeout=3600) as client:
            client.load(ckpt)
            changed = keys[: max(1, args.rows // 100)]
            client.push_sparse(1, changed, np.full((changed.size, DIM), 0.01, np.float32))
            start = time.perf_counter()
            client.save(ckpt, delta=True)
            delta_s = time.perf_counter() - start
            delta_bytes = _part_bytes(ckpt, 1)
    finally:
        server.shutdown(1.0)

    record = np.dtype([("key", "<i8"), ("data", "<f4", (2 * DIM,))])
    records = np.zeros(args.rows, dtype=record)
    records["key"] = keys

    def numpy_save() -> None:
        with open(npy, "wb") as f:
            np.save(f, records)
            f.flush()
            os.fsync(f.fileno())

    numpy_save()
    np_save_s = _best(numpy_save, args.reps)
    np_load_s = _best(lambda: np.load(npy), args.reps)
    np_bytes = os.path.getsize(npy)
    shutil.rmtree(args.dir, ignore_errors=True)

    mb = 1e6
    result = {
        "benchmark": "ps_checkpoint",
        "quick": args.quick,
        "rows": args.rows,
        "dim": DIM,
        "rule": "adagrad",
        "base_bytes": base_bytes,
        "numpy_bytes": np_bytes,
        "save_s": round(save_s, 3),
        "load_s": round(load_s, 3),
        "reload_s": round(reload_s, 3),
        "save_mb_per_s": round(base_bytes / mb / save_s, 1),
        "load_mb_per_s": round(base_bytes / mb / load_s, 1),
        "numpy_save_mb_per_s": round(np_bytes / mb / np_save_s, 1),
        "numpy_load_mb_per_s": round(np_bytes / mb / np_load_s, 1),
        "save_vs_numpy": round((base_bytes / save_s) / (np_bytes / np_save_s), 3),
        "load_vs_numpy": round((base_bytes / load_s) / (np_bytes / np_load_s), 3),
        "reload_vs_numpy": round((base_bytes / reload_s) / (np_bytes / np_load_s), 3),
        "delta_rows": int(changed.size),
        "delta_bytes": delta_bytes,
        "delta_save_s": round(delta_s, 3),
        "delta_bytes_ratio": round(delta_bytes / base_bytes, 5),
        "targets": {
            "save_vs_numpy": ">= 0.8",
            "load_vs_numpy": ">= 0.8",
            "delta_bytes_ratio": "<= 0.02",
        },
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
