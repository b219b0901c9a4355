"""Benchmark: a sparse table larger than its memory budget, on the SSD tier (storage "ssd"),
against the same job on an in-memory table that fits.

    .venv/bin/python benchmarks/ps_ssd.py [--quick]

One server process (fleet.ps.server) holds a table of dim 8 with Adagrad state, first filled to
`rows` rows (50M, about 4 GB in memory; --quick: 300k under a budget of 4 MB). Two worker
processes then pull and push batches of 512 x 26 ids drawn from a Zipf distribution (exponent
1.1, rank r -> id r - 1 modulo the table size), each its own stream, for `seconds` seconds.
The same run is made on an in-memory table and on an SSD table with memory_budget_mb = budget
(512 MB full). Reported: ssd_vs_memory_throughput (pull+push keys/s of the SSD run over the
in-memory run's; the issue's target is >= 0.5), hit_rate (of the rows the timed phase found,
the share found in memory), peak_rss_mb of the server (VmHWM) beside its resident size with an
empty table (the target is peak <= 1.3 x budget + base), and the raw rates. The CTR-DNN AUC
part of issue 31's benchmark is not run by this script.
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
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fleet.ps import PsClient  # noqa: E402
from fleet.testing.ps_cluster import start_servers  # noqa: E402

TABLE_ID = 1
DIM = 8
BATCH, SLOTS = 512, 26


def table(storage: str, budget_mb: float, ssd_path: str) -> dict:
    config = {
        "table_id": TABLE_ID,
        "name": "emb",
        "type": "SPARSE",
        "dim": DIM,
        "optimizer": {"learning_rate": 0.05, "adagrad": {}},
        "initializer": {"seed": 1, "uniform": {"low": -0.01, "high": 0.01}},
    }
    if storage == "ssd":
        config.update(storage="ssd", memory_budget_mb=budget_mb, ssd_path=ssd_path)
    return config


def rss_mb(pid: int, field: str) -> float:
    """VmRSS or VmHWM of a process, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def fill(client: PsClient, rows: int) -> None:
    """Creates rows 0..rows-1 by pulling them, in requests of BATCH * SLOTS ids."""
    step = BATCH * SLOTS
    for first in range(0, rows, step):
        client.pull_sparse(TABLE_ID, np.arange(first, min(rows, first + step), dtype=np.int64))


def worker(endpoint: str, rows: int, seconds: float, seed: int) -> None:
    """One worker process: pull then push a Zipf batch until `seconds` pass; prints its keys
    and time as JSON."""
    client = PsClient([endpoint], rpc_timeout=120.0)
    rng = np.random.default_rng(seed)
    grads = np.full((BATCH * SLOTS, DIM), 0.01, dtype=np.float32)
    keys = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        ids = (rng.zipf(1.1, size=BATCH * SLOTS) - 1) % rows
        client.pull_sparse(TABLE_ID, ids.astype(np.int64))
        client.push_sparse(TABLE_ID, ids.astype(np.int64), grads)
        keys += 2 * ids.size
    elapsed = time.perf_counter() - start
    client.close()
    print(json.dumps({"keys": keys, "seconds": elapsed}), flush=True)


COUNTERS = (
    "rows_in_memory",
    "rows_on_disk",
    "memory_hits",
    "disk_reads",
    "hit_rate",
    "bytes_read",
    "bytes_written",
    "evictions",
)


def ssd_counters(client: PsClient) -> dict:
    """The SSD tier's counters of the table on the (one) server; {} for an in-memory table."""
    stats = next(t for t in client.stats()[0] if t.table_id == TABLE_ID)
    return {} if stats.ssd is None else {k: getattr(stats.ssd, k) for k in COUNTERS}


def run(storage: str, rows: int, budget_mb: float, seconds: float, workdir: Path) -> dict:
    config = table(storage, budget_mb, str(workdir / "ssd_rows"))
    (workdir / storage).mkdir()
    with start_servers(workdir / storage, [config], num_servers=1, tag=storage) as cluster:
        pid = cluster.procs[0].pid
        base = rss_mb(pid, "VmRSS")
        client = cluster.client(rpc_timeout=600.0)
        t0 = time.perf_counter()
        fill(client, rows)
        fill_s = time.perf_counter() - t0
        before = ssd_counters(client)
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--worker",
                    cluster.endpoints[0],
                    "--rows",
                    str(rows),
                    "--seconds",
                    str(seconds),
                    "--seed",
                    str(w + 1),
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            for w in range(2)
        ]
        results = [
            json.loads(p.communicate(timeout=seconds + 600)[0].strip().splitlines()[-1])
            for p in procs
        ]
        after = ssd_counters(client)
        out = {
            "keys_per_s": sum(r["keys"] for r in results) / max(r["seconds"] for r in results),
            "fill_s": round(fill_s, 2),
            "base_rss_mb": round(base, 1),
            "peak_rss_mb": round(rss_mb(pid, "VmHWM"), 1),
        }
        if after:
            hits = after["memory_hits"] - before["memory_hits"]
            reads = after["disk_reads"] - before["disk_reads"]
            out["hit_rate"] = hits / max(1, hits + reads)
            out["tier"] = after
        client.close()
        return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small table, a few seconds")
    parser.add_argument("--worker", default="", help=argparse.SUPPRESS)
    parser.add_argument("--rows", type=int, default=0)
    parser.add_argument("--budget_mb", type=float, default=0)
    parser.add_argument("--seconds", type=float, default=0)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.rows, args.seconds, args.seed)
        return 0
    rows = args.rows or (300_000 if args.quick else 50_000_000)
    budget = args.budget_mb or (4.0 if args.quick else 512.0)
    seconds = args.seconds or (5.0 if args.quick else 60.0)
    with tempfile.TemporaryDirectory(prefix="fleet_ps_ssd_") as tmp:
        memory = run("memory", rows, budget, seconds, Path(tmp))
        ssd = run("ssd", rows, budget, seconds, Path(tmp))
    result = {
        "rows": rows,
        "dim": DIM,
        "budget_mb": budget,
        "batch": f"{BATCH}x{SLOTS}",
        "seconds": seconds,
        "memory_keys_per_s": round(memory["keys_per_s"]),
        "ssd_keys_per_s": round(ssd["keys_per_s"]),
        "ssd_vs_memory_throughput": round(ssd["keys_per_s"] / memory["keys_per_s"], 3),
        "hit_rate": round(ssd["hit_rate"], 4),
        "peak_rss_mb": ssd["peak_rss_mb"],
        "base_rss_mb": ssd["base_rss_mb"],
        "peak_rss_target_mb": round(1.3 * budget + ssd["base_rss_mb"], 1),
        "memory_peak_rss_mb": memory["peak_rss_mb"],
        "fill_s": {"memory": memory["fill_s"], "ssd": ssd["fill_s"]},
        "tier": ssd["tier"],
        "load_average": os.getloadavg()[0],
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
