"""Parameter servers (or other servers run the same way, such as the benchmarks' gRPC echo
peer) as real processes on 127.0.0.1, for tests and benchmarks. Each server binds port 0 (a free
port, no race) and reports the port it got in a ready file; ``PsCluster.stop()`` sends SIGTERM
and kills after a grace period."""

from __future__ import annotations

import dataclasses
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, List, Optional, Sequence

from fleet.ps import PsClient, server_config, write_server_config

REPO_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0


@dataclasses.dataclass
class PsCluster:
    endpoints: List[str]
    procs: List[subprocess.Popen]
    logs: List[Path]

    def client(self, **kwargs) -> PsClient:
        kwargs.setdefault("connect_timeout", 10.0)
        kwargs.setdefault("rpc_timeout", 10.0)
        return PsClient(self.endpoints, **kwargs)

    def log(self, i: int) -> str:
        return self.logs[i].read_text(errors="replace")

    def stop(self) -> None:
        """SIGTERM to every live process; SIGKILL to any still alive after the grace period."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=STOP_TIMEOUT_S)

    def __enter__(self) -> "PsCluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _wait_ready(proc: subprocess.Popen, ready: Path, log: Path) -> str:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if ready.exists():
            return ready.read_text().strip()
        if proc.poll() is not None:
            raise RuntimeError(
                f"server exited with {proc.returncode}:\n{log.read_text(errors='replace')}"
            )
        time.sleep(0.02)
    raise TimeoutError(
        f"server not ready within {START_TIMEOUT_S}s:\n{log.read_text(errors='replace')}"
    )


def _limit_file_size(max_bytes: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))

    return apply


def start_servers(
    workdir: Path,
    tables: Optional[Sequence[dict]],
    num_servers: int,
    tag: str = "ps",
    max_file_bytes: Optional[int] = None,
    module: str = "fleet.ps.server",
    root: Path = REPO_ROOT,
) -> PsCluster:
    """Starts ``num_servers`` processes of ``python -m module`` holding ``tables`` with files
    under ``workdir``, and waits until all serve. ``module`` takes ``--ready-file`` and
    ``--address``, and ``--config`` unless ``tables`` is None (a server with no tables, such as
    the benchmarks' ``fleet_bench.echo_server``, found through PYTHONPATH). ``max_file_bytes``
    limits the size of any file a server writes (RLIMIT_FSIZE; Python ignores SIGXFSZ, so a
    write past it fails with EFBIG), to stand in for a full disk. ``root`` is the source tree
    (with its built ``fleet._core``) the servers run from: another build's, for an A/B of the
    server alone."""
    pythonpath = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, PYTHONPATH=pythonpath)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")  # servers never multiply matrices
    cluster = PsCluster([], [], [])
    try:
        for i in range(num_servers):
            ready = workdir / f"{tag}-{i}.ready"
            log = workdir / f"{tag}-{i}.log"
            args = [
                sys.executable,
                "-m",
                module,
                "--ready-file",
                str(ready),
                "--address",
                "127.0.0.1:0",
            ]
            if tables is not None:
                config = workdir / f"{tag}-{i}.json"
                write_server_config(server_config(i, num_servers, tables), str(config))
                args += ["--config", str(config)]
            with open(log, "wb") as out:
                proc = subprocess.Popen(
                    args,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=str(workdir),
                    preexec_fn=None if max_file_bytes is None else _limit_file_size(max_file_bytes),
                )
            cluster.procs.append(proc)
            cluster.logs.append(log)
        for i, (proc, log) in enumerate(zip(cluster.procs, cluster.logs)):
            cluster.endpoints.append(_wait_ready(proc, workdir / f"{tag}-{i}.ready", log))
    except BaseException:
        cluster.stop()
        raise
    return cluster


__all__ = ["PsCluster", "start_servers"]
