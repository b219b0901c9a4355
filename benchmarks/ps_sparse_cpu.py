"""Benchmark: CPU time of a sparse pull and push, on the worker and on the server, over loopback
TCP and through the memory a worker shares with a server on its host.

    .venv/bin/python benchmarks/ps_sparse_cpu.py [--call step|geo_exchange|geo_two_calls]
        [--keys N] [--dim N]
        [--calls N] [--rounds N] [--servers N] [--quick] [--transport tcp|shm|both]

A CTR-DNN worker pulls and pushes its batch's embedding rows every step: 26 slots x 512 ids
(13,312 keys, fewer once repeats are merged) of 10 floats, about 0.5 MB of rows each way plus
the keys. One call here is what a step does: a pull of those rows, then a push of their
gradients through Adam. The keys of each call are drawn from a power law over 2 million ids,
as a click log's are, so rows repeat within a call and across calls.

--call geo_exchange measures what a GEO worker's exchange asks of the servers instead: every
geo_steps (10) steps it pushes the deltas of the rows it touched, each key once, and takes their
values after the push. One call is a delta push of the distinct keys of --geo_steps steps'
draws whose reply carries the rows (PsClient::PushPullSparse, as GeoCommunicator sends it; the
table's rule, Adam, is not applied to deltas). --call geo_two_calls is the same exchange as a
delta push and then a pull of the same keys, as GEO sent it before, for an A/B in one build
(both pull the same rows).

--servers server processes
(python -m fleet.ps.server) hold the table; this process reads its own CPU time (getrusage)
and the servers' (/proc) over --calls calls a round, figures that hardly move with the
machine's load, unlike wall time.

--transport picks how the keys and rows travel: over loopback TCP (the default), through the
memory shared with the servers (PsClient(local_shared_memory=True), a_sync_configs
["local_transport"] = "shm"), or both, alternating a TCP round and a shared-memory round,
each against its own servers holding the same table, so that both see the same rows (then the
JSON holds each transport's figures under "tcp" and "shm", "rows_equal", whether both
transports pulled the same rows bit for bit in every call, and "shm_vs_tcp_cpu", the
shared-memory rounds' client_us + server_us over the TCP rounds').

The last line is one JSON object: per round and as medians, client_us and server_us (CPU
microseconds per call, all servers together) and client_waits (voluntary context switches per
call).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cpu_clock import own_cpu, process_cpu_s  # noqa: E402

from fleet.testing.ps_cluster import start_servers  # noqa: E402

TABLE_ID = 1
CTR_DNN_KEYS = 26 * 512
CTR_DNN_DIM = 10
ID_SPACE = 2_000_000
WARMUP_CALLS = 10


def table(dim: int) -> dict:
    return {
        "table_id": TABLE_ID,
        "name": "embedding",
        "type": "SPARSE",
        "dim": dim,
        "optimizer": {"learning_rate": 1e-3, "adam": {}},
        "initializer": {"seed": 3, "uniform": {"low": -0.01, "high": 0.01}},
    }


def batches(
    count: int, keys: int, dim: int, seed: int, distinct: bool = False
) -> list[tuple[np.ndarray, np.ndarray]]:
    """`count` calls' keys (power law over ID_SPACE; each once with `distinct`) and gradients,
    drawn before timing."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        ids = (rng.zipf(1.3, keys) - 1) % ID_SPACE
        if distinct:
            ids = np.unique(ids)
        grads = (rng.standard_normal(len(ids) * dim) * 0.01).astype(np.float32)
        out.append((ids.astype(np.int64), grads))
    return out


def one_round(client, server_pids: list[int], work: list, dim: int, kind: str) -> tuple[dict, list]:
    """Runs the warm-up and timed calls of `work` (--call `kind`); returns the figures and
    every pulled array."""
    pulled = []

    def call(keys: np.ndarray, grads: np.ndarray) -> None:
        if kind == "geo_exchange":
            pulled.append(client.push_pull_sparse(TABLE_ID, keys, grads, delta=True))
            return
        if kind == "geo_two_calls":
            client.push_sparse(TABLE_ID, keys, grads, delta=True)
            pulled.append(client.pull_sparse(TABLE_ID, keys))
            return
        rows = client.pull_sparse(TABLE_ID, keys)
        pulled.append(rows)
        client.push_sparse(TABLE_ID, keys, grads)

    for keys, grads in work[:WARMUP_CALLS]:
        call(keys, grads)
    timed = work[WARMUP_CALLS:]
    cpu0, waits0 = own_cpu()
    server0 = sum(process_cpu_s(pid) for pid in server_pids)
    for keys, grads in timed:
        call(keys, grads)
    cpu1, waits1 = own_cpu()
    server1 = sum(process_cpu_s(pid) for pid in server_pids)
    calls = len(timed)
    return {
        "client_us": round((cpu1 - cpu0) / calls * 1e6, 1),
        "server_us": round((server1 - server0) / calls * 1e6, 1),
        "client_waits": round((waits1 - waits0) / calls, 2),
    }, pulled


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--call",
        choices=("step", "geo_exchange", "geo_two_calls"),
        default="step",
        help="a step's pull and gradient push, or a GEO exchange's delta push-pull (or its push "
        "and then pull)",
    )
    parser.add_argument(
        "--keys", type=int, default=CTR_DNN_KEYS, help="keys drawn a step (repeats included)"
    )
    parser.add_argument(
        "--geo_steps", type=int, default=10, help="steps an exchange gathers (geo_exchange)"
    )
    parser.add_argument("--dim", type=int, default=CTR_DNN_DIM, help="floats a row")
    parser.add_argument("--calls", type=int, default=300, help="pull + push calls a round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--servers", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="1 round of 50 calls")
    parser.add_argument(
        "--transport",
        choices=("tcp", "shm", "both"),
        default="tcp",
        help="how keys and rows travel (both: alternating rounds)",
    )
    args = parser.parse_args()
    if args.quick:
        args.calls, args.rounds = 50, 1
    transports = ["tcp", "shm"] if args.transport == "both" else [args.transport]
    rounds: dict[str, list] = {t: [] for t in transports}
    rows_equal = True
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="ps_sparse_cpu_") as work:
        clusters, clients = {}, {}
        try:
            for t in transports:
                (Path(work) / t).mkdir()
                clusters[t] = start_servers(
                    Path(work) / t, [table(args.dim)], args.servers, tag=f"sparse_{t}"
                )
                host = clusters[t].endpoints[0].rsplit(":", 1)[0]
                clients[t] = clusters[t].client(
                    local_host=host, local_socket=False, local_shared_memory=t == "shm"
                )
            if "shm" in clients and not all(
                clients["shm"].shared_memory(s) for s in range(args.servers)
            ):
                raise SystemExit("ps_sparse_cpu: a server did not map the shared memory")
            geo = args.call != "step"
            draws = args.keys * args.geo_steps if geo else args.keys
            for r in range(args.rounds):
                work_items = batches(
                    WARMUP_CALLS + args.calls, draws, args.dim, seed=r, distinct=geo
                )
                pulled = {}
                for t in transports:
                    pids = [p.pid for p in clusters[t].procs]
                    figures, pulled[t] = one_round(
                        clients[t], pids, work_items, args.dim, args.call
                    )
                    rounds[t].append(figures)
                if len(transports) == 2:
                    rows_equal &= all(
                        a.tobytes() == b.tobytes() for a, b in zip(pulled["tcp"], pulled["shm"])
                    )
            for client in clients.values():
                client.close()
        finally:
            for cluster in clusters.values():
                cluster.stop()
    result = {
        "call": args.call,
        "keys": args.keys,
        "dim": args.dim,
        "calls": args.calls,
        "servers": args.servers,
        "transport": args.transport,
    }
    if geo:
        result["geo_steps"] = args.geo_steps
    for t in transports:
        figures = result if len(transports) == 1 else result.setdefault(t, {})
        figures["rounds"] = rounds[t]
        for key in ("client_us", "server_us", "client_waits"):
            figures[key] = statistics.median(r[key] for r in rounds[t])
    if len(transports) == 2:
        tcp, shm = result["tcp"], result["shm"]
        result["rows_equal"] = rows_equal
        result["shm_vs_tcp_cpu"] = round(
            (shm["client_us"] + shm["server_us"]) / (tcp["client_us"] + tcp["server_us"]), 3
        )
    result["loadavg_1min_before"] = round(load_before, 2)
    result["loadavg_1min_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
