"""Helpers for jobs over several "hosts" on one machine: each host is a loopback address of its
own (127.0.0.2, 127.0.0.3, ...; Linux routes all of 127/8 to the loopback interface), runs its
own `fleetrun --host=<its address>` as a user would on a real machine, and the test reads the
processes' sockets (ss) to check that each one binds and talks only on its host's address."""

from __future__ import annotations

import dataclasses
import os
import re
import select
import socket
import subprocess
import time
from typing import NamedTuple

from fleet.launch.plan import free_ports
from tests.python.e2e import launch_helpers as lh

# The PS jobs of the multi-host tests: 2 servers on two hosts, 2 workers on a third.
SERVER_HOSTS, WORKER_HOST = ("127.0.0.2", "127.0.0.3"), "127.0.0.4"


class PsLayout(NamedTuple):
    options: list[str]  # fleetrun's --servers, --workers and --store_port
    servers: list[str]  # endpoints, server 0 on SERVER_HOSTS[0] and server 1 on SERVER_HOSTS[1]
    workers: list[str]  # endpoints, both on WORKER_HOST
    store: str  # the rendezvous store's endpoint (worker 0's host)


def ps_layout() -> PsLayout:
    """Free ports for the PS layout above."""
    s0, s1 = (free_ports(h, 1)[0] for h in SERVER_HOSTS)
    w0, w1, store = free_ports(WORKER_HOST, 3)
    servers = [f"{SERVER_HOSTS[0]}:{s0}", f"{SERVER_HOSTS[1]}:{s1}"]
    workers = [f"{WORKER_HOST}:{w0}", f"{WORKER_HOST}:{w1}"]
    options = [
        f"--servers={','.join(servers)}",
        f"--workers={','.join(workers)}",
        f"--store_port={store}",
    ]
    return PsLayout(options, servers, workers, f"{WORKER_HOST}:{store}")


@dataclasses.dataclass(frozen=True)
class Socket:
    state: str  # ss's state: LISTEN, ESTAB, ...
    local: str  # ip:port
    peer: str
    pid: int

    @property
    def local_ip(self) -> str:
        return _ip_of(self.local)

    @property
    def peer_ip(self) -> str:
        return _ip_of(self.peer)


def _ip_of(endpoint: str) -> str:
    """The IPv4 address of "1.2.3.4:5" or of gRPC's dual-stack "[::ffff:1.2.3.4]:5"."""
    ip = endpoint.rpartition(":")[0].strip("[]")
    return ip.removeprefix("::ffff:")


def sockets_of(pid_list: list[int]) -> list[Socket]:
    """Every TCP socket (any state) the given processes hold, from `ss -tanp`."""
    wanted = set(pid_list)
    out = subprocess.run(["ss", "-tanpH"], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        fields = line.split()
        if len(fields) < 6:
            continue
        for pid in map(int, re.findall(r"pid=(\d+)", line)):
            if pid in wanted:
                found.append(Socket(fields[0], fields[3], fields[4], pid))
    return found


def common_free_port(addresses: list[str], count: int = 1, tries: int = 20) -> int:
    """A first port P such that P..P+count-1 are free on every address (fleetrun's
    --started_port gives each host the same ports)."""
    for _ in range(tries):
        first = free_ports(addresses[0], 1)[0]
        if first + count >= 65536:
            continue
        if all(_bindable(a, first + i) for a in addresses for i in range(count)):
            return first
    raise AssertionError(f"no {count} consecutive ports free on all of {addresses}")


def _bindable(address: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((address, port))
            return True
        except OSError:
            return False


def start_host(job_dir, host: str, options: list[str], body: str, collective: bool = False, **env):
    """One host's `fleetrun --host=<host> ...` in the background (its own session)."""
    script = lh.write_script(job_dir, body)
    return subprocess.Popen(
        lh.launcher_command([*options, f"--host={host}"], script),
        env=lh.job_env(job_dir, collective, **env),
        cwd=lh.REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def wait_for_records(job_dir, name: str, count: int, launchers: dict, timeout: float = 90):
    """Waits until `count` processes recorded `name`; fails early when a host's fleetrun ends."""
    deadline = time.monotonic() + timeout
    # Counted by files holding something: a record is created, then written.
    while sum(p.stat().st_size > 0 for p in job_dir.glob(f"{name}.*.json")) < count:
        for host, launcher in launchers.items():
            if launcher.poll() is not None:
                out, err = launcher.communicate()
                raise AssertionError(
                    f"fleetrun of host {host} ended early ({launcher.returncode}):\n{out}\n{err}"
                )
        assert time.monotonic() < deadline, f"{count} '{name}' records not there in {timeout} s"
        time.sleep(0.1)


def read_stderr_until(launcher: subprocess.Popen, text: str, timeout: float = 90) -> str:
    """Reads a running fleetrun's stderr (a pipe) until `text` has appeared, and returns what was
    read; what follows stays in the pipe for communicate(). Fails when fleetrun ends first."""
    fd = launcher.stderr.fileno()
    read = b""
    deadline = time.monotonic() + timeout
    while text.encode() not in read:
        left = deadline - time.monotonic()
        assert left > 0, f"'{text}' not on fleetrun's stderr within {timeout} s:\n{read.decode()}"
        if select.select([fd], [], [], min(left, 0.5))[0]:
            chunk = os.read(fd, 65536)
            assert chunk, f"fleetrun ended before '{text}' was on its stderr:\n{read.decode()}"
            read += chunk
    return read.decode(errors="replace")


def finish(launchers: dict, timeout: float = 90) -> dict:
    """host -> (exit code, stdout, stderr) of each host's fleetrun, stopping any left over."""
    results = {}
    for host, launcher in launchers.items():
        try:
            out, err = launcher.communicate(timeout=timeout)
            results[host] = (launcher.returncode, out, err)
        finally:
            lh.stop_launcher(launcher)
    return results
