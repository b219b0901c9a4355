"""Fixtures that run parameter servers as real processes on 127.0.0.1 (free ports: each server
binds port 0 and reports the port it got through a ready file). Every process started here is
stopped at the end of the test: SIGTERM, then SIGKILL after a grace period."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, List, Sequence

import pytest

from fleet.ps import PsClient, server_config, write_server_config

REPO_ROOT = Path(__file__).resolve().parents[3]
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
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=STOP_TIMEOUT_S)


def _wait_ready(proc: subprocess.Popen, ready: Path, log: Path) -> str:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if ready.exists():
            return ready.read_text().strip()
        if proc.poll() is not None:
            raise RuntimeError(f"parameter server exited with {proc.returncode}:\n"
                               f"{log.read_text(errors='replace')}")
        time.sleep(0.02)
    raise TimeoutError(f"parameter server not ready within {START_TIMEOUT_S}s:\n"
                       f"{log.read_text(errors='replace')}")


def start_servers(workdir: Path, tables: Sequence[dict], num_servers: int,
                  tag: str = "ps") -> PsCluster:
    """Starts ``num_servers`` server processes holding ``tables`` and waits until all serve."""
    env = dict(os.environ, PYTHONPATH=f"{REPO_ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    cluster = PsCluster([], [], [])
    try:
        for i in range(num_servers):
            config = workdir / f"{tag}-{i}.json"
            write_server_config(server_config(i, num_servers, tables), str(config))
            ready = workdir / f"{tag}-{i}.ready"
            log = workdir / f"{tag}-{i}.log"
            with open(log, "wb") as out:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "fleet.ps.server", "--config", str(config),
                     "--ready-file", str(ready), "--address", "127.0.0.1:0"],
                    stdout=out, stderr=subprocess.STDOUT, env=env, cwd=str(workdir))
            cluster.procs.append(proc)
            cluster.logs.append(log)
        for proc, log, i in zip(cluster.procs, cluster.logs, range(num_servers)):
            cluster.endpoints.append(_wait_ready(proc, workdir / f"{tag}-{i}.ready", log))
    except BaseException:
        cluster.stop()
        raise
    return cluster


@pytest.fixture
def ps_servers(tmp_path: Path) -> Callable[..., PsCluster]:
    """``ps_servers(tables, num_servers, tag="ps") -> PsCluster``; all stopped at teardown."""
    clusters: List[PsCluster] = []

    def start(tables: Sequence[dict], num_servers: int = 1, tag: str = "ps") -> PsCluster:
        cluster = start_servers(tmp_path, tables, num_servers, tag)
        clusters.append(cluster)
        return cluster

    yield start
    for cluster in clusters:
        cluster.stop()
