"""Checks the workers' Gloo group the way a parameter-server job builds it, without training.

N ranks run in N real processes on 127.0.0.1 with the environment fleetrun gives a PS job's workers
(fleet.launch.plan.build_plan: free ports, the TCP store at worker 0, the job identity). Each
process calls fleet.util.all_reduce, which connects the group exactly as a training script's first
utility call does (fleet/base/util_base.py: the same GlooGroup.connect arguments, rank_addresses,
gone-rank naming), then checks the sums and maxima of a few all-reduces and barriers. With --grpc,
each rank also serves one parameter-server shard and keeps a PsClient of all shards pulling in a
background thread throughout, as a PS job's workers have gRPC open when they connect.

Prints one JSON line; exits 1 naming the rank and the signal of any process that crashed (its
native crash report, FLEET_NATIVE_BACKTRACE=1, and Python stack are printed from its log).
--debugger runs rank 0 under gdb (or cuda-gdb) -batch -ex run -ex bt, for a native backtrace at
the fault itself; --rank0_prefix runs it under any wrapper (valgrind, ...).

  python scripts/gloo_check.py --ranks 12 [--grpc] [--repeat 3] [--debugger]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Optional

import numpy as np

import fleet
from fleet import role_maker as rm
from fleet._crash_report import NATIVE_BACKTRACE
from fleet.launch.args import parse_args as parse_fleetrun_args
from fleet.launch.plan import ProcSpec, build_plan
from fleet.ps import PsClient, server_config, start_server

CHILD_FLAG = "--child"
# Once a rank has failed, how long the others get to end by themselves before they are killed.
GRACE_AFTER_FAILURE_S = 5.0


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--ranks", type=int, default=6, help="workers in the group (default 6)")
    p.add_argument("--grpc", action="store_true", help="each rank also serves and pulls over gRPC")
    p.add_argument("--rounds", type=int, default=3, help="all-reduce + barrier rounds (default 3)")
    p.add_argument("--repeat", type=int, default=1, help="whole runs, fresh processes each")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds a run may take")
    p.add_argument("--debugger", action="store_true", help="rank 0 under gdb/cuda-gdb -batch")
    p.add_argument("--rank0_prefix", default="", help="command rank 0 runs under (valgrind ...)")
    p.add_argument(
        "--crash_rank",
        type=int,
        default=-1,
        help="that rank segfaults in C code (ctypes.string_at(0)) as it joins: checks this check",
    )
    p.add_argument("--log_dir", default="", help="ranks' logs (default: a temporary directory)")
    return p.parse_args(argv)


# -- one rank -------------------------------------------------------------------------------


def _dense_table() -> dict:
    return {
        "table_id": 0,
        "type": "DENSE",
        "dim": 64,
        "optimizer": {"learning_rate": 0.1, "sgd": {}},
        "initializer": {"zero": {}},
    }


class _Puller:
    """This rank's gRPC side in --grpc: one shard served here, and a client of every shard that
    pulls in a loop until stopped, as a PS worker's communicator talks to the servers."""

    def __init__(self, role: rm.RoleMakerBase, timeout: float) -> None:
        servers = role.server_endpoints()
        rank = role.worker_index()
        config = server_config(rank, len(servers), [_dense_table()])
        self.server = start_server(config, address=servers[rank], job_id=role.job_id)
        self.client = PsClient(servers, connect_timeout=timeout, job_id=role.job_id)
        self.pulls = 0
        self.error: Optional[BaseException] = None
        self._stop = threading.Event()
        self._pulled = threading.Event()  # one pull of the loop is done
        self._timeout = timeout
        self.client.pull_dense(0)  # every shard answers before the group is built
        self._thread = threading.Thread(target=self._loop, name="gloo-check-pull", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                self.client.pull_dense(0)
                self.pulls += 1
                self._pulled.set()
        except BaseException as e:  # raised again by stop_pulling()
            self.error = e
            self._pulled.set()

    def stop_pulling(self) -> None:
        # At least one pull overlaps the collectives, however the threads were scheduled.
        self._pulled.wait(self._timeout)
        self._stop.set()
        self._thread.join()
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        """After every rank has stopped pulling (a barrier): the others pull from this shard."""
        self.client.close()
        self.server.shutdown(1.0)


def run_rank(rounds: int, grpc: bool, crash: bool, timeout: float) -> dict:
    """The body of one rank process: the role comes from fleetrun's variables."""
    role = rm.PaddleCloudRoleMaker()
    fleet.init(role)
    rank, size = fleet.worker_index(), fleet.worker_num()
    puller = _Puller(role, timeout) if grpc else None
    if crash:
        ctypes.string_at(0)  # reads address 0 in C: SIGSEGV
    start = time.perf_counter()
    # The first utility call builds the group: what train_ps.py's first all_reduce does.
    total = fleet.util.all_reduce(np.array([float(rank)]), "sum")[0]
    connect_s = time.perf_counter() - start
    expected_sum = size * (size - 1) / 2
    if total != expected_sum:
        raise RuntimeError(f"rank {rank}: all_reduce sum {total}, expected {expected_sum}")
    for r in range(rounds):
        values = np.arange(4096, dtype=np.float32) + rank + r
        top = fleet.util.all_reduce(values, "max")
        if not np.array_equal(top, np.arange(4096, dtype=np.float32) + size - 1 + r):
            raise RuntimeError(f"rank {rank}: all_reduce max of round {r} is wrong")
        fleet.util.barrier()
    pulls = 0
    if puller is not None:
        puller.stop_pulling()
        fleet.util.barrier()
        puller.close()
        pulls = puller.pulls
    return {"rank": rank, "connect_s": round(connect_s, 3), "pulls": pulls}


# -- the check ------------------------------------------------------------------------------


def find_debugger() -> Optional[str]:
    for name in ("gdb", "cuda-gdb"):
        found = shutil.which(name) or shutil.which(name, path="/usr/local/cuda/bin")
        if found:
            return found
    return None


def worker_specs(ranks: int, grpc: bool) -> list[ProcSpec]:
    """fleetrun's plan of a PS job with `ranks` workers on this machine (and as many servers with
    --grpc, served by the workers themselves; one unused server otherwise)."""
    servers = ranks if grpc else 1
    args = parse_fleetrun_args(
        ["--server_num", str(servers), "--worker_num", str(ranks), os.path.abspath(__file__)]
    )
    plan = build_plan(args, dict(os.environ))
    return [p for p in plan.procs if p.role == "worker"]


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _tail(path: str, lines: int = 60) -> str:
    with open(path, errors="replace") as f:
        return "".join(f.readlines()[-lines:])


def run_once(opts: argparse.Namespace, log_dir: str, debugger: Optional[str]) -> dict:
    specs = worker_specs(opts.ranks, opts.grpc)
    child = [sys.executable, "-u", os.path.abspath(__file__), CHILD_FLAG]
    child += ["--rounds", str(opts.rounds), "--timeout", str(opts.timeout)]
    child += ["--grpc"] if opts.grpc else []
    procs = []
    started = time.perf_counter()
    try:
        for spec in specs:
            env = dict(os.environ, **spec.env, PYTHONFAULTHANDLER="1")
            env.setdefault(NATIVE_BACKTRACE, "1")
            env.setdefault(rm.GLOO_TIMEOUT, str(opts.timeout))
            command = child + (["--crash"] if spec.rank == opts.crash_rank else [])
            if spec.rank == 0 and debugger:
                gdb = [debugger, "-q", "-batch", "-ex", "handle SIGPIPE nostop noprint pass"]
                gdb += ["-ex", "run", "-ex", "bt", "-ex", "info threads"]
                command = gdb + ["-ex", "thread apply all bt 12", "--args"] + command
            elif spec.rank == 0 and opts.rank0_prefix:
                command = shlex.split(opts.rank0_prefix) + command
            log = os.path.join(log_dir, f"rank{spec.rank}.log")
            with open(log, "w") as out:
                popen = subprocess.Popen(
                    command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
                )
            procs.append((spec.rank, popen, log))
        deadline = started + opts.timeout
        while time.perf_counter() < deadline:
            codes = [popen.poll() for _, popen, _ in procs]
            if all(code is not None for code in codes):
                break
            if any(code not in (None, 0) for code in codes):
                # A rank is gone: the others fail on their own within moments (their peer's
                # connection drops), or wait for it until their timeout; give them a little.
                deadline = min(deadline, time.perf_counter() + GRACE_AFTER_FAILURE_S)
            time.sleep(0.05)
    finally:
        for _, popen, _ in procs:
            if popen.poll() is None:
                os.killpg(popen.pid, signal.SIGKILL)
                popen.wait()
    result = {"seconds": round(time.perf_counter() - started, 2), "crashes": [], "failures": []}
    connect = []
    failed_first = any(popen.returncode not in (0, -signal.SIGKILL) for _, popen, _ in procs)
    for rank, popen, log in procs:
        text = _tail(log, 400)
        report = None
        for line in reversed(text.splitlines()):
            if line.startswith("{") and '"connect_s"' in line:
                report = json.loads(line)
                break
        crashed = popen.returncode < 0 and popen.returncode != -signal.SIGKILL
        if rank == 0 and debugger and "received signal SIG" in text:
            crashed = True
            after = text.split("received signal ", 1)[1]
            result["crashes"].append({"rank": rank, "signal": after.split(",")[0], "log": log})
        elif crashed:
            result["crashes"].append(
                {"rank": rank, "signal": _signal_name(popen.returncode), "log": log}
            )
        elif report is None:
            cause = "failed"
            if popen.returncode == -signal.SIGKILL:
                cause = "killed after another rank failed" if failed_first else "timed out (killed)"
            last = text.strip().splitlines()[-1:] or [""]
            result["failures"].append(
                {"rank": rank, "exit": popen.returncode, "cause": cause, "last_line": last[0][:300]}
            )
        if report is not None:
            connect.append(report["connect_s"])
    result["connect_s_max"] = max(connect) if connect else None
    result["ok"] = not result["crashes"] and not result["failures"]
    return result


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == [CHILD_FLAG]:
        child = argparse.ArgumentParser()
        child.add_argument("--rounds", type=int, default=3)
        child.add_argument("--grpc", action="store_true")
        child.add_argument("--crash", action="store_true")
        child.add_argument("--timeout", type=float, default=60.0)
        known = child.parse_args(argv[1:])
        print(
            json.dumps(run_rank(known.rounds, known.grpc, known.crash, known.timeout)), flush=True
        )
        return 0
    opts = parse_args(argv)
    debugger = find_debugger() if opts.debugger else None
    log_root = opts.log_dir or tempfile.mkdtemp(prefix="gloo_check.")
    runs = []
    for i in range(opts.repeat):
        log_dir = os.path.join(log_root, f"run{i}")
        os.makedirs(log_dir, exist_ok=True)
        runs.append(run_once(opts, log_dir, debugger))
    failed = [r for r in runs if not r["ok"]]
    summary = {
        "check": "gloo",
        "ranks": opts.ranks,
        "grpc": opts.grpc,
        "rounds": opts.rounds,
        "runs": len(runs),
        "failed_runs": len(failed),
        "ok": not failed,
        "seconds": [r["seconds"] for r in runs],
        "connect_s_max": [r["connect_s_max"] for r in runs],
        "crashes": [c for r in runs for c in r["crashes"]],
        "failures": [f for r in runs for f in r["failures"]],
        "debugger": debugger if opts.debugger else None,
        "rank0_prefix": opts.rank0_prefix or None,
        "logs": log_root,
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
    }
    print(json.dumps(summary), flush=True)
    if opts.debugger and debugger is None:
        print("gloo_check: --debugger: neither gdb nor cuda-gdb was found", file=sys.stderr)
    for crash in summary["crashes"]:
        print(
            f"gloo_check: rank {crash['rank']} died of {crash['signal']}; end of its log "
            f"({crash['log']}):\n{_tail(crash['log'])}",
            file=sys.stderr,
        )
    for failure in summary["failures"]:
        print(f"gloo_check: rank {failure['rank']} {failure['cause']}: {failure}", file=sys.stderr)
    if not failed and not opts.log_dir:
        shutil.rmtree(log_root, ignore_errors=True)
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
