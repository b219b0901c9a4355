"""Benchmark: parameter-server throughput over gRPC on loopback, beside the transport's own
limits measured in the same run.

    .venv/bin/python benchmarks/ps_throughput.py [--quick]

1 and 2 server processes (fleet.ps.server) serve sparse tables of dim 8, 16 and 64 and dense
tables of 1 MB and 64 MB (SGD). A client with 1 and 2 threads (sharing one PsClient) measures
sparse pull and push of 1k, 10k and 100k keys, dense pull and push, and the p50/p99 latency of
a 1k-key pull. Peers, same bytes, same run, interleaved round by round (best round kept for
each, which damps other load on the machine):
  - gRPC echo: as many echo-server processes as PS servers (`python -m fleet_bench.echo_server`,
    benchmarks/native/echo.cc: same gRPC, message limits, protobuf bytes fields and threading),
    the request bytes split evenly over them and a reply of the pulled bytes;
  - memcpy of the request plus reply bytes, in one thread.
In process (no RPC): the same pulls straight from a table of the same size, the lookups' own
limit. Memory: a 10-million-row sparse table in this process, resident bytes per row against
8 bytes of key + 4 per float of value and update-rule state.
The last line of output is one JSON object; vs_* ratios > 1 mean faster than the peer.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
BENCH_DIR = str(Path(__file__).resolve().parent)  # fleet_bench, the native peers
sys.path.insert(0, BENCH_DIR)
# The echo peer processes find fleet_bench the same way.
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (BENCH_DIR, os.environ.get("PYTHONPATH")) if p
)

import fleet_bench  # noqa: E402
from fleet import _core  # noqa: E402
from fleet.ps import table_config  # noqa: E402
from fleet.testing.ps_cluster import start_servers  # noqa: E402

MB = 1 << 20
DENSE_ID = {1: 101, 64: 164}  # dense table of N MB
SGD = {"learning_rate": 0.01, "sgd": {}}


def plan(quick: bool) -> dict:
    if quick:
        return dict(
            servers=(1, 2),
            threads=(1, 2),
            batches=(1000, 100_000),
            dims=(8, 64),
            dense_mb=(1, 64),
            dense_threads=(1,),
            universe=200_000,
            budget=0.1,
            rounds=2,
            latency_samples=150,
            memory=[(8, "sgd")],
        )
    return dict(
        servers=(1, 2),
        threads=(1, 2),
        batches=(1000, 10_000, 100_000),
        dims=(8, 16, 64),
        dense_mb=(1, 64),
        dense_threads=(1, 2),
        universe=1_000_000,
        budget=0.6,
        rounds=3,
        latency_samples=1000,
        memory=[(8, "sgd"), (8, "adam"), (64, "adagrad")],
    )


def tables(p: dict) -> List[dict]:
    out = [
        {
            "table_id": d,
            "name": f"emb{d}",
            "type": "SPARSE",
            "dim": d,
            "optimizer": SGD,
            "initializer": {"seed": 1, "uniform": {"low": -0.1, "high": 0.1}},
        }
        for d in p["dims"]
    ]
    out += [
        {
            "table_id": DENSE_ID[mb],
            "name": f"dense{mb}mb",
            "type": "DENSE",
            "dim": mb * MB // 4,
            "optimizer": SGD,
            "initializer": {"zero": {}},
        }
        for mb in p["dense_mb"]
    ]
    return out


def best_rate(fn: Callable[[int, int], None], threads: int, budget: float) -> float:
    """Calls fn(thread, i) in `threads` threads for `budget` seconds; calls per second."""
    counts = [0] * threads
    errors: List[BaseException] = []
    start = threading.Barrier(threads + 1)
    stop_at = [0.0]

    def work(t: int) -> None:
        start.wait()
        i = 0
        try:
            while time.perf_counter() < stop_at[0]:
                fn(t, i)
                i += 1
        except BaseException as e:  # re-raised in the caller's thread below
            errors.append(e)
        counts[t] = i

    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    fn(0, 0)  # warm
    begin = time.perf_counter()
    stop_at[0] = begin + budget
    start.wait()
    for th in pool:
        th.join()
    if errors:
        raise errors[0]
    return sum(counts) / (time.perf_counter() - begin)


def paired(ours: Callable, peer: Callable, threads: int, p: dict) -> tuple:
    """Best calls/s of ours and of the peer over interleaved rounds."""
    a = b = 0.0
    for _ in range(p["rounds"]):
        a = max(a, best_rate(ours, threads, p["budget"]))
        b = max(b, best_rate(peer, threads, p["budget"]))
    return a, b


def memcpy_rate(nbytes: int) -> float:
    """Bytes per second of one memcpy of nbytes (best of a few runs)."""
    iters = max(3, min(2000, (256 * MB) // max(nbytes, 1)))
    return nbytes / min(fleet_bench.memcpy_seconds(nbytes, iters) for _ in range(3))


def row(
    op: str, servers: int, threads: int, calls: float, echo_calls: float, nbytes: int, **extra
) -> dict:
    ours = calls * nbytes / MB
    echo = echo_calls * nbytes / MB
    mcp = memcpy_rate(nbytes) / MB
    return dict(
        op=op,
        servers=servers,
        threads=threads,
        **extra,
        mb_per_s=round(ours, 1),
        grpc_echo_mb_per_s=round(echo, 1),
        vs_grpc_echo=round(ours / echo, 3),
        memcpy_mb_per_s=round(mcp, 1),
        vs_memcpy=round(ours / mcp, 4),
    )


def sparse_rows(client, echo, servers: int, p: dict, rng) -> List[dict]:
    out = []
    for dim in p["dims"]:
        universe = rng.integers(-(2**63), 2**63 - 1, p["universe"], dtype=np.int64)
        for chunk in np.array_split(universe, max(1, universe.size // 100_000)):
            client.pull_sparse(dim, chunk)  # create the rows before timing
        for batch in p["batches"]:
            keys = [[rng.permutation(universe)[:batch] for _ in range(4)] for _ in range(2)]
            outs = [np.empty((batch, dim), np.float32) for _ in range(2)]
            grads = (rng.standard_normal((batch, dim)) * 1e-3).astype(np.float32)
            pull_req = np.zeros(8 * batch, np.uint8)
            push_req = np.zeros((8 + 4 * dim) * batch, np.uint8)
            replies = [np.empty(4 * dim * batch, np.uint8) for _ in range(2)]
            empty = [np.empty(0, np.uint8) for _ in range(2)]
            for threads in p["threads"]:
                calls, echo_calls = paired(
                    lambda t, i: client.pull_sparse(dim, keys[t][i % 4], outs[t]),
                    lambda t, i: echo.echo(pull_req, replies[t]),
                    threads,
                    p,
                )
                out.append(
                    row(
                        "sparse_pull",
                        servers,
                        threads,
                        calls,
                        echo_calls,
                        (8 + 4 * dim) * batch,
                        batch=batch,
                        dim=dim,
                        keys_per_s=round(calls * batch),
                    )
                )
                calls, echo_calls = paired(
                    lambda t, i: client.push_sparse(dim, keys[t][i % 4], grads),
                    lambda t, i: echo.echo(push_req, empty[t]),
                    threads,
                    p,
                )
                out.append(
                    row(
                        "sparse_push",
                        servers,
                        threads,
                        calls,
                        echo_calls,
                        (8 + 4 * dim) * batch,
                        batch=batch,
                        dim=dim,
                        keys_per_s=round(calls * batch),
                    )
                )
                print(
                    f"  {servers} server(s) {threads} thread(s) batch {batch:>6} dim {dim:>2}: "
                    f"pull {out[-2]['keys_per_s']:>10,} keys/s ({out[-2]['vs_grpc_echo']:.2f}"
                    f" of echo), push {out[-1]['keys_per_s']:>10,} keys/s "
                    f"({out[-1]['vs_grpc_echo']:.2f})",
                    file=sys.stderr,
                )
    return out


def dense_rows(client, echo, servers: int, p: dict) -> List[dict]:
    out = []
    for mb in p["dense_mb"]:
        n = mb * MB // 4
        outs = [np.empty(n, np.float32) for _ in range(2)]
        grads = np.full(n, 1e-6, np.float32)
        small = np.zeros(8, np.uint8)
        replies = [np.empty(4 * n, np.uint8) for _ in range(2)]
        payload = np.zeros(4 * n, np.uint8)
        empty = [np.empty(0, np.uint8) for _ in range(2)]
        for threads in p["dense_threads"]:
            calls, echo_calls = paired(
                lambda t, i: client.pull_dense(DENSE_ID[mb], outs[t]),
                lambda t, i: echo.echo(small, replies[t]),
                threads,
                p,
            )
            out.append(row("dense_pull", servers, threads, calls, echo_calls, 4 * n, mb=mb))
            calls, echo_calls = paired(
                lambda t, i: client.push_dense(DENSE_ID[mb], grads),
                lambda t, i: echo.echo(payload, empty[t]),
                threads,
                p,
            )
            out.append(row("dense_push", servers, threads, calls, echo_calls, 4 * n, mb=mb))
            print(
                f"  {servers} server(s) {threads} thread(s) dense {mb:>2} MB: pull "
                f"{out[-2]['mb_per_s']:>8} MB/s ({out[-2]['vs_grpc_echo']:.2f} of echo), push "
                f"{out[-1]['mb_per_s']:>8} MB/s ({out[-1]['vs_grpc_echo']:.2f})",
                file=sys.stderr,
            )
    return out


def latency(client, echo, servers: int, p: dict, rng) -> dict:
    dim, n = p["dims"][0], 1000
    keys = rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64)
    out = np.empty((n, dim), np.float32)
    request, reply = np.zeros(8 * n, np.uint8), np.empty(4 * dim * n, np.uint8)
    client.pull_sparse(dim, keys, out)
    ours, peer = [], []
    for _ in range(p["latency_samples"]):  # interleaved, so both see the same load
        t = time.perf_counter()
        client.pull_sparse(dim, keys, out)
        ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        echo.echo(request, reply)
        peer.append(time.perf_counter() - t)
    us = lambda xs, q: round(float(np.percentile(xs, q)) * 1e6, 1)  # noqa: E731
    return dict(
        servers=servers,
        keys=n,
        dim=dim,
        p50_us=us(ours, 50),
        p99_us=us(ours, 99),
        grpc_echo_p50_us=us(peer, 50),
        grpc_echo_p99_us=us(peer, 99),
    )


def in_process(p: dict, rng) -> List[dict]:
    """The tables' own limit: pulls of the largest batch from a table of `universe` rows in this
    process (no RPC, one thread), so that the RPC figures can be read against it."""
    out = []
    batch = max(p["batches"])
    for dim in p["dims"]:
        table = _core.ps.SparseTable(
            table_config(tables(p)[p["dims"].index(dim)]).SerializeToString()
        )
        universe = rng.integers(-(2**63), 2**63 - 1, p["universe"], dtype=np.int64)
        for chunk in np.array_split(universe, max(1, universe.size // 100_000)):
            table.pull(chunk)
        keys = [rng.permutation(universe)[:batch] for _ in range(4)]
        rows = np.empty((batch, dim), np.float32)
        calls = max(
            best_rate(lambda t, i, table=table: table.pull(keys[i % 4], rows), 1, p["budget"])
            for _ in range(p["rounds"])
        )
        out.append(
            dict(
                dim=dim,
                batch=batch,
                universe=p["universe"],
                keys_per_s=round(calls * batch),
                ms_per_pull=round(1e3 / calls, 3),
            )
        )
        print(
            f"  in process, dim {dim:>2}: {out[-1]['keys_per_s']:>12,} keys/s "
            f"({out[-1]['ms_per_pull']} ms per {batch:,} keys of {p['universe']:,} rows)",
            file=sys.stderr,
        )
        del table
    return out


def resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure_memory(dim: int, rule: str, rows: int) -> dict:
    """Builds a `rows`-row table in this process and measures it (see memory())."""
    optimizer = {
        "sgd": SGD,
        "adam": {"learning_rate": 0.01, "adam": {}},
        "adagrad": {"learning_rate": 0.01, "adagrad": {}},
    }[rule]
    config = table_config(
        {
            "table_id": 1,
            "type": "SPARSE",
            "dim": dim,
            "optimizer": optimizer,
            "initializer": {"seed": 1, "uniform": {"low": -0.1, "high": 0.1}},
        }
    )
    rng = np.random.default_rng(3)
    gc.collect()
    before = resident_bytes()
    table = _core.ps.SparseTable(config.SerializeToString())
    start = time.perf_counter()
    step = 50_000  # small batches: the allocator keeps little of their temporaries resident
    for _ in range(rows // step):  # fresh random keys over the whole int64 range
        table.pull(rng.integers(-(2**63), 2**63 - 1, step, dtype=np.int64))
    seconds = time.perf_counter() - start
    gc.collect()
    resident = resident_bytes() - before
    stats = table.stats()
    floats = table.row_width
    bound = 8 + 4 * floats
    return dict(
        rows=stats.rows,
        dim=dim,
        rule=rule,
        floats_per_row=floats,
        key_and_floats_bytes=bound,
        resident_bytes_per_row=round(resident / rows, 2),
        table_bytes_per_row=round(stats.bytes / rows, 2),
        bytes_per_row_ratio=round(resident / rows / bound, 3),
        insert_keys_per_s=round(rows / seconds),
    )


def memory(dim: int, rule: str, rows: int = 10_000_000) -> dict:
    """Resident bytes per row of a `rows`-row sparse table, measured in a fresh process so that
    the heap holds nothing but the table (no leftovers of the throughput runs)."""
    code = (
        f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
        f"import ps_throughput as b; "
        f"print(json.dumps(b.measure_memory({dim}, {rule!r}, {rows})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=600
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer configs (under a minute)")
    args = parser.parse_args()
    p = plan(args.quick)
    began = time.perf_counter()
    rng = np.random.default_rng(0)
    result: Dict[str, object] = {
        "benchmark": "ps_throughput",
        "quick": args.quick,
        "cpus": os.cpu_count(),
        "loadavg_1min": os.getloadavg()[0],
        "sparse": [],
        "dense": [],
        "latency_1k_pull": [],
    }
    with tempfile.TemporaryDirectory(prefix="ps_bench_") as tmp:
        for servers in p["servers"]:
            work = Path(tmp) / f"s{servers}"
            work.mkdir()
            with (
                start_servers(work, tables(p), servers) as ps,
                start_servers(
                    work, None, servers, tag="echo", module="fleet_bench.echo_server"
                ) as peers,
            ):
                client = ps.client(rpc_timeout=120.0)
                echo = fleet_bench.EchoClient(peers.endpoints)
                result["latency_1k_pull"].append(latency(client, echo, servers, p, rng))
                result["sparse"] += sparse_rows(client, echo, servers, p, rng)
                result["dense"] += dense_rows(client, echo, servers, p)
                del client, echo
            print(f"[{time.perf_counter() - began:.0f}s] {servers} server(s) done", file=sys.stderr)
    result["sparse_pull_in_process"] = in_process(p, rng)
    result["memory"] = [memory(dim, rule) for dim, rule in p["memory"]]
    for m in result["memory"]:
        print(
            f"  {m['rows']:,} rows dim {m['dim']} {m['rule']}: {m['resident_bytes_per_row']} "
            f"bytes/row resident vs {m['key_and_floats_bytes']} of key and floats "
            f"({m['bytes_per_row_ratio']}x)",
            file=sys.stderr,
        )
    print(f"[{time.perf_counter() - began:.0f}s] memory done", file=sys.stderr)
    large = [
        r
        for r in result["sparse"]
        if r["op"] == "sparse_pull"
        and r["servers"] == 1
        and r["threads"] == 1
        and r["batch"] == max(p["batches"])
    ]
    result["sparse_pull_vs_grpc_echo_by_dim"] = {r["dim"]: r["vs_grpc_echo"] for r in large}
    # Headline: the least favourable dim of the large batch (1 server, 1 thread).
    result["sparse_pull_vs_grpc_echo"] = min(r["vs_grpc_echo"] for r in large)
    result["bytes_per_row_ratio"] = result["memory"][0]["bytes_per_row_ratio"]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
