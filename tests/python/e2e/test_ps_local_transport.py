"""The parameter server's local transport against server processes (python -m fleet.ps.server):
a server started with --local_transport also listens on a Unix-domain socket named after its
endpoint (seen with ss), a client on its host (local_host) calls it there, a client on another
127.0.0.x "host" calls over TCP, and a server without the socket is called over TCP after one
line on stderr. And a fleetrun job with a_sync_configs["local_transport"]: both workers train
over the server's socket (the sync "w" model, w_model.py, comes out exact)."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest

from fleet.launch.plan import free_ports
from fleet.ps import PsClient, server_config, write_server_config
from fleet.testing.ps_reference import sgd_sparse_table
from tests.python.e2e import launch_helpers as lh

pytestmark = pytest.mark.timeout(120)

TABLE = sgd_sparse_table(learning_rate=1.0)


def _start(tmp_path, host, local_transport):
    """A server process on a free port of `host`; returns (process, endpoint)."""
    config = tmp_path / "server.json"
    write_server_config(server_config(0, 1, [TABLE]), config)
    (port,) = free_ports(host, 1)
    endpoint = f"{host}:{port}"
    ready = tmp_path / f"ready-{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "fleet.ps.server", "--config", str(config)]
        + ["--address", endpoint, "--ready-file", str(ready)]
        + (["--local_transport"] if local_transport else []),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            _stop(proc)
            pytest.fail(f"the server on {endpoint} did not start (exit {proc.returncode})")
        time.sleep(0.02)
    return proc, endpoint


def _stop(proc):
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


def _unix_listeners(pid):
    """The Unix-domain socket names `pid` listens on (ss -xlp; abstract names start with @)."""
    out = subprocess.run(["ss", "-xlpH"], capture_output=True, text=True, check=True).stdout
    return {line.split()[4] for line in out.splitlines() if f"pid={pid}," in line}


def _unix_peers_of(name, server_pid):
    """The pids at the other end of the connections `server_pid` accepted on socket `name`: ss
    -xp lists each end as state, queues, its address, its inode, the peer's address and inode."""
    out = subprocess.run(["ss", "-xpH"], capture_output=True, text=True, check=True).stdout
    lines = [line.split() for line in out.splitlines() if "ESTAB" in line and "pid=" in line]
    peer_inodes = {f[7] for f in lines if f[4] == name and f"pid={server_pid}," in f[8]}
    pid_of_inode = {f[5]: int(f[8].split("pid=")[1].split(",")[0]) for f in lines}
    return {pid_of_inode[inode] for inode in peer_inodes if inode in pid_of_inode}


def _push_and_pull(client):
    keys = np.array([3, 9], np.int64)
    client.push_sparse(1, keys, np.full((2, 4), 2.0, np.float32))
    assert client.pull_sparse(1, keys).tolist() == [[-2.0] * 4] * 2


def test_a_client_on_the_servers_host_calls_it_over_its_unix_socket(tmp_path, capfd):
    proc, endpoint = _start(tmp_path, "127.0.0.1", local_transport=True)
    try:
        assert f"@fleet-ps/{endpoint}" in _unix_listeners(proc.pid)
        with PsClient([endpoint], local_host="127.0.0.1") as client:
            assert client.target(0) == f"unix-abstract:fleet-ps/{endpoint}"
            _push_and_pull(client)
        # Without local_host the same server is called over TCP, and sees the same rows.
        with PsClient([endpoint]) as client:
            assert client.target(0) == endpoint
            assert client.pull_sparse(1, np.array([3], np.int64)).tolist() == [[-2.0] * 4]
    finally:
        _stop(proc)
    assert "local transport" not in capfd.readouterr().err


def test_a_server_without_the_socket_is_called_over_tcp_after_a_notice(tmp_path, capfd):
    proc, endpoint = _start(tmp_path, "127.0.0.1", local_transport=False)
    try:
        assert not any("fleet-ps" in name for name in _unix_listeners(proc.pid))
        with PsClient([endpoint], local_host="127.0.0.1") as client:
            assert client.target(0) == endpoint
            _push_and_pull(client)
    finally:
        _stop(proc)
    notice = [line for line in capfd.readouterr().err.splitlines() if "local transport" in line]
    assert len(notice) == 1, notice
    assert f"parameter server 0 at {endpoint} is on this host" in notice[0]
    assert "calling it over TCP" in notice[0]


def test_a_client_on_another_host_calls_over_tcp(tmp_path, capfd):
    # The server is on "host" 127.0.0.2 and has its socket; a client whose own address is
    # 127.0.0.1 is on another host as the job lists them.
    proc, endpoint = _start(tmp_path, "127.0.0.2", local_transport=True)
    try:
        assert f"@fleet-ps/{endpoint}" in _unix_listeners(proc.pid)
        with PsClient([endpoint], local_host="127.0.0.1") as client:
            assert client.target(0) == endpoint
            _push_and_pull(client)
        with PsClient([endpoint], local_host="127.0.0.2") as client:
            assert client.target(0) == f"unix-abstract:fleet-ps/{endpoint}"
    finally:
        _stop(proc)
    assert "local transport" not in capfd.readouterr().err


LR, STEPS = 0.5, 6
PS_TRAIN = f"""
from tests.python.e2e.w_model import start
worker = start({LR}, {{"local_transport": True}})
for step in range({STEPS}):
    worker.step()
record("w", worker.w())
# Hold the connections open until the test has read the sockets.
while not (JOB_DIR / "release").exists():
    time.sleep(0.05)
fleet.stop_worker()
"""


def test_a_job_with_local_transport_trains_over_the_servers_socket(tmp_path):
    server, w0, w1, store = free_ports("127.0.0.1", 4)
    endpoint = f"127.0.0.1:{server}"
    options = [
        f"--servers={endpoint}",
        f"--workers=127.0.0.1:{w0},127.0.0.1:{w1}",
        f"--store_port={store}",
    ]
    launcher = lh.start_job(tmp_path, options, PS_TRAIN)
    try:
        lh.wait_for_records(tmp_path, "w", 2, [launcher])
        pids = lh.pids(tmp_path)
        workers = {pids["worker.0"], pids["worker.1"]}
        assert _unix_peers_of(f"@fleet-ps/{endpoint}", pids["server.0"]) == workers
        (tmp_path / "release").write_text("")
        code, out, err = lh.finish(launcher)
    finally:
        lh.stop_launcher(launcher)
        lh.kill_leftovers(tmp_path)
    assert code == 0, err
    assert "local transport" not in err
    assert lh.recorded(tmp_path, "w") == {"worker.0": -LR * STEPS, "worker.1": -LR * STEPS}
