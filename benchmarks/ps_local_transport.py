"""Benchmark: CPU per dense round trip between a worker and a parameter server on one host,
over loopback TCP against the server's Unix-domain socket (a_sync_configs["local_transport"]).

    .venv/bin/python benchmarks/ps_local_transport.py [--quick]

One server process (``python -m fleet.ps.server --local_transport``) holds a dense SGD table of
CTR-DNN's size (431,329 floats, 1.7 MB: what a worker pushes and pulls every step). This
process pushes the gradient and pulls the values back, `--steps` times a round, once through a
client that calls the server over TCP and once through one that uses its Unix socket, the two in
alternating order for `--rounds` rounds. The figure is CPU, not time: user + system seconds of
the server process (/proc/<pid>/stat) and of this process (every thread: gRPC's, the client's)
over the round, per round trip. CPU per round trip depends far less on a neighbour's load than
wall time does, which a shared machine makes noise of. The peer beside each figure: memcpy of
the round trip's bytes (3.4 MB), the copy every transport makes at least twice.

The last line of output is one JSON object: medians over the rounds of each side's CPU per
round trip (microseconds), `local_vs_tcp_cpu` (< 1: the Unix socket costs less CPU), every
round with the load average before and after it (benchmarks/rounds.py).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fleet.ps.client import PsClient  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rounds import alternate, max_load, medians  # noqa: E402

DENSE_FLOATS = 431_329  # CTR-DNN's dense parameters (examples/ctr_dnn)
HOST = "127.0.0.1"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _process_cpu_s(pid: int) -> float:
    """utime + stime of every thread of `pid`, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _start_server(workdir: Path) -> tuple[subprocess.Popen, str]:
    config = {
        "server_index": 0,
        "num_servers": 1,
        "tables": [
            {
                "table_id": 0,
                "name": "dense",
                "type": "DENSE",
                "dim": str(DENSE_FLOATS),
                "dense_block_size": 8192,
                "optimizer": {"learning_rate": 1e-6, "sgd": {}},
                "initializer": {"constant": {"value": 0.0}},
            }
        ],
    }
    (workdir / "server.json").write_text(json.dumps(config))
    ready = workdir / "ready"
    endpoint = f"{HOST}:{_free_port()}"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fleet.ps.server",
            "--config",
            str(workdir / "server.json"),
            "--address",
            endpoint,
            "--ready-file",
            str(ready),
            "--local_transport",
        ],
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"the server on {endpoint} did not start (exit {proc.poll()})")
        time.sleep(0.05)
    return proc, endpoint


def _round(client: PsClient, server_pid: int, steps: int) -> dict:
    """CPU microseconds per push + pull of the dense table, of each side."""
    grads = np.full(DENSE_FLOATS, 1e-3, dtype=np.float32)
    out = np.empty(DENSE_FLOATS, dtype=np.float32)
    for _ in range(5):  # connection warm, buffers allocated
        client.push_dense(0, grads)
        client.pull_dense(0, out)
    server0, own0, wall0 = _process_cpu_s(server_pid), _own_cpu_s(), time.perf_counter()
    for _ in range(steps):
        client.push_dense(0, grads)
        client.pull_dense(0, out)
    wall = time.perf_counter() - wall0
    server = (_process_cpu_s(server_pid) - server0) / steps * 1e6
    worker = (_own_cpu_s() - own0) / steps * 1e6
    return {
        "server_us": round(server, 1),
        "worker_us": round(worker, 1),
        "total_us": round(server + worker, 1),
        "wall_us": round(wall / steps * 1e6, 1),
    }


def _memcpy_us(steps: int) -> float:
    """Thread CPU microseconds of copying a round trip's bytes (push + pull) once."""
    src = np.ones(2 * DENSE_FLOATS, dtype=np.float32)
    dst = np.empty_like(src)
    start = time.thread_time()
    for _ in range(steps):
        np.copyto(dst, src)
    return (time.thread_time() - start) / steps * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 round of 100 round trips")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=400, help="round trips a round and side")
    args = parser.parse_args()
    rounds, steps = (1, 100) if args.quick else (args.rounds, args.steps)
    with tempfile.TemporaryDirectory(prefix="fleet-local-transport-") as tmp:
        proc, endpoint = _start_server(Path(tmp))
        try:
            clients = {
                "tcp": PsClient([endpoint]),
                "local": PsClient([endpoint], local_host=HOST),
            }
            if not clients["local"].target(0).startswith("unix"):
                raise RuntimeError(f"the client did not take the Unix socket of {endpoint}")
            results = alternate(
                rounds,
                {
                    side: lambda side=side: _round(clients[side], proc.pid, steps)
                    for side in clients
                },
            )
            for client in clients.values():
                client.close()
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    keys = ("server_us", "worker_us", "total_us", "wall_us")
    median = {side: medians(runs, keys) for side, runs in results.items()}
    report = {
        "dense_floats": DENSE_FLOATS,
        "rounds": rounds,
        "steps_per_round": steps,
        "tcp_cpu_us_per_round_trip": median["tcp"],
        "local_cpu_us_per_round_trip": median["local"],
        "local_vs_tcp_cpu": round(median["local"]["total_us"] / median["tcp"]["total_us"], 3),
        "memcpy_us_per_round_trip_bytes": round(_memcpy_us(steps), 1),
        "every_round": results,
        "max_load_average": max_load([*results["tcp"], *results["local"]]),
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
