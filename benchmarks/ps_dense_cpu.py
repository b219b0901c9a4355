"""Benchmark: CPU time of a dense push and pull, on the worker and on the server, beside the
memory copies that moving the same bytes takes at least.

    .venv/bin/python benchmarks/ps_dense_cpu.py [--dim N] [--calls N] [--rounds N] [--quick]
        [--call push_then_pull|push_pull|push|sync_step] [--server_tree DIR]
        [--transport tcp|shm|both]

A PS job moves its whole dense table twice a step (the gradients up, the values back:
CTR-DNN's 425,984 floats, 1.7 MB each way), and on a machine whose cores all train, what that
costs in CPU is what the job loses (issue 28). One server process (python -m fleet.ps.server)
holds an Adam table of --dim floats; this process pushes a gradient and pulls the values
--calls times a round and reads its own CPU time (getrusage) and the server's (/proc), so the
figures hardly move with the machine's load, unlike wall time. The peer: the CPU time of
copying the same bytes once on each side of each call (memcpy in this process), the least any
transport that copies at each end takes.

--call picks what one call is: a push then a pull (two round trips, the default), a push-pull
(one round trip whose reply carries the values after the push, as an async worker's dense
step), or a push alone, or a sync step (a one-worker job's step: the gradients as an accumulate push
and the step barrier sent together, the barrier's reply (or, with shared memory, the worker's
segment) bringing back the values after the step's update). With a small --dim, a push alone
measures what a request costs apart from the table's work. --server_tree runs the server from
another source tree and its build (for example a clone at an older commit), so that the same
client compares two servers.
--transport picks how the floats travel: over loopback TCP (the default), through memory
shared with the server (PsClient(local_shared_memory=True), a_sync_configs["local_transport"]
= "shm"), or both, alternating a TCP round and a shared-memory round against the same server
(then the JSON holds each transport's figures under "tcp" and "shm", and "shm_vs_tcp_cpu",
the shared-memory rounds' client_us + server_us over the TCP rounds').

The last line is one JSON object: per round and as medians, client_us and server_us (CPU
microseconds per call), client_waits (voluntary context switches per call) and
memcpy_us, and client_vs_memcpy (client_us / memcpy_us); "values_sum" of each round checks
that two servers compared computed the same values.
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

from fleet.testing.ps_cluster import REPO_ROOT, start_servers  # noqa: E402

TABLE_ID = 1
CTR_DNN_DENSE_FLOATS = 425_984
WARMUP_CALLS = 10


def table(dim: int) -> dict:
    return {
        "table_id": TABLE_ID,
        "name": "dense",
        "type": "DENSE",
        "dim": dim,
        "optimizer": {"learning_rate": 1e-3, "adam": {}},
        "initializer": {"constant": {"value": 0.1}},
    }


def memcpy_us(dim: int, calls: int) -> float:
    """CPU microseconds of copying a push's and a pull's bytes once at each end (4 copies)."""
    source = np.full(dim, 0.5, dtype=np.float32)
    target = np.empty_like(source)
    before, _ = own_cpu()
    for _ in range(calls * 4):
        np.copyto(target, source)
    return (own_cpu()[0] - before) / calls * 1e6


def one_round(client, server_pid: int, dim: int, calls: int, kind: str) -> dict:
    grads = (np.random.default_rng(0).standard_normal(dim) * 0.01).astype(np.float32)
    values = np.empty(dim, dtype=np.float32)

    def call() -> None:
        if kind == "sync_step":
            client.core_client.sync_step_and_pull_dense(TABLE_ID, grads, values, 1, 0, 60.0)
            return
        if kind == "push_pull":
            client.push_pull_dense(TABLE_ID, grads, values)
            return
        client.push_dense(TABLE_ID, grads)
        if kind == "push_then_pull":
            client.pull_dense(TABLE_ID, values)

    for _ in range(WARMUP_CALLS):
        call()
    cpu0, waits0 = own_cpu()
    server0 = process_cpu_s(server_pid)
    for _ in range(calls):
        call()
    cpu1, waits1 = own_cpu()
    server1 = process_cpu_s(server_pid)
    return {
        "client_us": round((cpu1 - cpu0) / calls * 1e6, 1),
        "server_us": round((server1 - server0) / calls * 1e6, 1),
        "client_waits": round((waits1 - waits0) / calls, 2),
        "memcpy_us": round(memcpy_us(dim, calls), 1),
        "values_sum": float(values.sum()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dim", type=int, default=CTR_DNN_DENSE_FLOATS, help="dense floats")
    parser.add_argument("--calls", type=int, default=300, help="pushes + pulls a round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="1 round of 50 calls")
    parser.add_argument(
        "--call",
        choices=("push_then_pull", "push_pull", "push", "sync_step"),
        default="push_then_pull",
        help="what one call is",
    )
    parser.add_argument(
        "--transport",
        choices=("tcp", "shm", "both"),
        default="tcp",
        help="how the floats travel (both: alternating rounds)",
    )
    parser.add_argument(
        "--server_tree",
        type=Path,
        default=REPO_ROOT,
        help="source tree (with its build) the server runs from",
    )
    args = parser.parse_args()
    if args.quick:
        args.calls, args.rounds = 50, 1
    transports = ["tcp", "shm"] if args.transport == "both" else [args.transport]
    rounds: dict[str, list] = {t: [] for t in transports}
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="ps_dense_cpu_") as work:
        cluster = start_servers(Path(work), [table(args.dim)], 1, root=args.server_tree.resolve())
        try:
            host = cluster.endpoints[0].rsplit(":", 1)[0]
            clients = {
                t: cluster.client(
                    local_host=host, local_socket=False, local_shared_memory=t == "shm"
                )
                for t in transports
            }
            if "shm" in clients and not clients["shm"].shared_memory(0):
                raise SystemExit("ps_dense_cpu: the server did not map the shared memory")
            for _ in range(args.rounds):
                for t in transports:
                    rounds[t].append(
                        one_round(clients[t], cluster.procs[0].pid, args.dim, args.calls, args.call)
                    )
            for client in clients.values():
                client.close()
        finally:
            cluster.stop()
    result = {
        "dim": args.dim,
        "calls": args.calls,
        "call": args.call,
        "transport": args.transport,
        "server_tree": str(args.server_tree.resolve()),
    }
    for t in transports:
        figures = result if len(transports) == 1 else result.setdefault(t, {})
        figures["rounds"] = rounds[t]
        for key in ("client_us", "server_us", "client_waits", "memcpy_us"):
            figures[key] = statistics.median(r[key] for r in rounds[t])
        figures["client_vs_memcpy"] = round(figures["client_us"] / figures["memcpy_us"], 2)
    if len(transports) == 2:
        tcp, shm = result["tcp"], result["shm"]
        result["shm_vs_tcp_cpu"] = round(
            (shm["client_us"] + shm["server_us"]) / (tcp["client_us"] + tcp["server_us"]), 3
        )
    result["loadavg_1min_before"] = round(load_before, 2)
    result["loadavg_1min_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
