"""Dense floats, and sparse keys and rows, through memory shared by a worker and a server on one
host (a_sync_configs["local_transport"] = "shm", csrc/ps/detail/shm_segment.h), against server
processes (python -m fleet.ps.server): two workers' pushes, push-pulls and pulls give the values
of the same calls over TCP bit for bit, with 1 and 2 servers, and so do their sparse pulls after
sparse pushes (gradients and GEO deltas); a server in another pid namespace
(as in another container) cannot map the segment, and the worker says so once and keeps the
wire; a closed worker's segment is dropped by the server, a killed worker's goes with the
server, and nothing is ever left in /dev/shm. And a fleetrun job with the option: both workers
train (the sync "w" model, w_model.py, comes out exact)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from fleet import _core
from fleet.launch.plan import free_ports
from fleet.ps import PsClient, server_config, write_server_config
from fleet.testing.ps_cluster import start_servers
from tests.python.e2e import launch_helpers as lh

pytestmark = pytest.mark.timeout(120)

DIM = 5000  # 5 blocks of BLOCK floats, dealt over the servers
BLOCK = 1024
DENSE = {
    "table_id": 1,
    "name": "dense",
    "type": "DENSE",
    "dim": DIM,
    "dense_block_size": BLOCK,
    "optimizer": {"learning_rate": 1e-2, "adam": {}},
    "initializer": {"constant": {"value": 0.1}},
}


def _host(endpoint: str) -> str:
    return endpoint.rsplit(":", 1)[0]


def _shm_client(endpoints, **kwargs) -> PsClient:
    return PsClient(
        endpoints,
        local_host=_host(endpoints[0]),
        local_socket=False,
        local_shared_memory=True,
        **kwargs,
    )


def _segment_names(pid: int) -> set:
    """The workers' shared-memory segments that process `pid` maps (/memfd:fleet-ps-<token>)."""
    with open(f"/proc/{pid}/maps") as maps:
        return {line.split()[-2] for line in maps if "memfd:fleet-ps-" in line}


def _segments_mapped(pid: int) -> int:
    return len(_segment_names(pid))


def _dev_shm() -> set:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


def _steps(workers) -> list:
    """Six steps of two workers in turn (push, push-pull, pull), every value each returned."""
    seen = []
    for step in range(6):
        for w, client in enumerate(workers):
            grads = np.sin(np.arange(DIM, dtype=np.float32) * (step + 1) + w).astype(np.float32)
            client.push_dense(1, grads)
            values = np.empty(DIM, np.float32)
            client.push_pull_dense(1, grads * 0.5, values)
            pulled = np.empty(DIM, np.float32)
            client.pull_dense(1, pulled)
            seen += [values, pulled]
    return seen


@pytest.mark.parametrize("num_servers", [1, 2])
def test_two_workers_through_shared_memory_get_the_values_of_tcp_bit_for_bit(tmp_path, num_servers):
    before = _dev_shm()
    (tmp_path / "tcp").mkdir()
    (tmp_path / "shm").mkdir()
    with (
        start_servers(tmp_path / "tcp", [DENSE], num_servers) as tcp,
        start_servers(tmp_path / "shm", [DENSE], num_servers) as shm,
    ):
        tcp_workers = [tcp.client() for _ in range(2)]
        shm_workers = [_shm_client(shm.endpoints) for _ in range(2)]
        for client in shm_workers:
            assert all(client.shared_memory(s) for s in range(num_servers))
        assert not any(c.shared_memory(s) for c in tcp_workers for s in range(num_servers))
        for proc in shm.procs:
            assert _segments_mapped(proc.pid) == 2  # one per worker
        expected, got = _steps(tcp_workers), _steps(shm_workers)
        for client in tcp_workers + shm_workers:
            client.close()
        for proc in shm.procs:
            assert _segments_mapped(proc.pid) == 0  # closing detached them
    assert len(got) == len(expected) == 24
    for i, (e, g) in enumerate(zip(expected, got)):
        assert np.array_equal(e.view(np.uint32), g.view(np.uint32)), f"value {i} differs"
    assert not np.array_equal(expected[0], expected[-1])  # the steps moved the values
    assert _dev_shm() == before


SPARSE = {
    "table_id": 2,
    "name": "embedding",
    "type": "SPARSE",
    "dim": 10,
    "optimizer": {"learning_rate": 1e-2, "adam": {}},
    "initializer": {"seed": 5, "uniform": {"low": -0.1, "high": 0.1}},
}


def _sparse_steps(workers) -> list:
    """Six steps of two workers in turn (a pull of a batch's rows, then a push of their
    gradients and a GEO delta), every pulled array: keys repeat within and across steps."""
    seen = []
    for step in range(6):
        for w, client in enumerate(workers):
            rng = np.random.default_rng(step * 2 + w)
            keys = (rng.zipf(1.3, 2000) - 1) % 100_000 - 50  # some negative
            seen.append(client.pull_sparse(2, keys))
            grads = rng.standard_normal((keys.size, 10)).astype(np.float32)
            client.push_sparse(2, keys, grads)
            client.push_sparse(2, keys[::3], grads[::3] * 0.01, delta=True)
    return seen


@pytest.mark.parametrize("num_servers", [1, 2])
def test_two_workers_sparse_rows_through_shared_memory_are_those_of_tcp_bit_for_bit(
    tmp_path, num_servers
):
    before = _dev_shm()
    (tmp_path / "tcp").mkdir()
    (tmp_path / "shm").mkdir()
    tables = [DENSE, SPARSE]
    with (
        start_servers(tmp_path / "tcp", tables, num_servers) as tcp,
        start_servers(tmp_path / "shm", tables, num_servers) as shm,
    ):
        tcp_workers = [tcp.client() for _ in range(2)]
        shm_workers = [_shm_client(shm.endpoints) for _ in range(2)]
        for client in shm_workers:
            assert all(client.shared_memory(s) for s in range(num_servers))
        expected, got = _sparse_steps(tcp_workers), _sparse_steps(shm_workers)
        # The keys and rows went through the segments: the shm workers' sparse calls carried
        # only ranges and statuses on the wire.
        tcp_bytes = sum(_sparse_wire_bytes(c) for c in tcp_workers)
        shm_bytes = sum(_sparse_wire_bytes(c) for c in shm_workers)
        for client in tcp_workers + shm_workers:
            client.close()
        for proc in shm.procs:
            assert _segments_mapped(proc.pid) == 0
    assert shm_bytes * 50 < tcp_bytes, (shm_bytes, tcp_bytes)
    assert len(got) == len(expected) == 12
    for i, (e, g) in enumerate(zip(expected, got)):
        assert np.array_equal(e.view(np.uint32), g.view(np.uint32)), f"pull {i} differs"
    assert _dev_shm() == before


def _sparse_wire_bytes(client: PsClient) -> int:
    """The bytes the client's sparse pulls and pushes sent and received (its RPC meter)."""
    kinds = _core.monitoring.client_rpcs(client.core_client).kinds
    return sum(
        k.bytes_sent + k.bytes_received for k in kinds if k.kind in ("pull_sparse", "push_sparse")
    )


def test_a_server_that_cannot_map_the_segment_leaves_the_floats_on_the_wire(tmp_path, capfd):
    unshare = shutil.which("unshare")
    if (
        unshare is None
        or subprocess.run(
            [unshare, "--pid", "--fork", "--mount-proc", "true"], capture_output=True
        ).returncode
        != 0
    ):
        pytest.skip("cannot start a process in another pid namespace here (unshare)")
    config = tmp_path / "server.json"
    write_server_config(server_config(0, 1, [DENSE]), config)
    (port,) = free_ports("127.0.0.1", 1)
    endpoint = f"127.0.0.1:{port}"
    ready = tmp_path / "ready"
    # Its own pid namespace and /proc: the worker's /proc/<pid>/fd is not there, as in another
    # container on the same host (the network is shared, so TCP still reaches it).
    proc = subprocess.Popen(
        [unshare, "--pid", "--fork", "--mount-proc", sys.executable, "-m", "fleet.ps.server"]
        + ["--config", str(config), "--address", endpoint, "--ready-file", str(ready)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)
        with _shm_client([endpoint]) as client:
            assert not client.shared_memory(0)
            values = np.empty(DIM, np.float32)
            client.push_pull_dense(1, np.ones(DIM, np.float32), values)
            assert np.all(values < 0.1)  # Adam moved every value against the gradient
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    err = capfd.readouterr().err
    assert err.count("shares no memory with this worker") == 1, err
    assert f"parameter server 0 at {endpoint}" in err


WORKER = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    from fleet.ps import PsClient
    endpoint = sys.argv[1]
    client = PsClient([endpoint], local_host=endpoint.rsplit(":", 1)[0], local_socket=False,
                      local_shared_memory=True)
    assert client.shared_memory(0)
    values = np.empty({dim}, np.float32)
    client.push_pull_dense(1, np.ones({dim}, np.float32), values)
    print("attached", flush=True)
    time.sleep(60)
    """
).format(dim=DIM)


def test_a_killed_workers_segment_goes_with_the_server_and_nothing_is_left(tmp_path):
    before = _dev_shm()
    with start_servers(tmp_path, [DENSE], 1) as cluster:
        worker = subprocess.Popen(
            [sys.executable, "-c", WORKER, cluster.endpoints[0]],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert worker.stdout.readline().strip() == "attached"
            names = _segment_names(cluster.procs[0].pid)
            assert len(names) == 1
            worker.kill()
            worker.wait(timeout=10)
            # The server keeps the memory mapped (it cannot know the worker will not come
            # back) and serves the other workers on; nothing of it has a name anywhere.
            assert _segment_names(cluster.procs[0].pid) == names
            with cluster.client() as client:
                values = np.empty(DIM, np.float32)
                client.pull_dense(1, values)
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait(timeout=10)
    assert _dev_shm() == before
    # No process maps the killed worker's segment any more (other jobs' segments may exist).
    assert not [pid for pid in os.listdir("/proc") if pid.isdigit() and _maps(int(pid), names)]


def _maps(pid: int, names: set) -> bool:
    try:
        return bool(_segment_names(pid) & names)
    except OSError:  # the process ended or is not ours to read
        return False


LR, STEPS = 0.5, 6
PS_TRAIN = f"""
from tests.python.e2e.w_model import start
worker = start({LR}, {{"local_transport": "shm"}})
for step in range({STEPS}):
    worker.step()
record("w", worker.w())
fleet.stop_worker()
"""


def test_a_job_with_shared_memory_trains_exactly(tmp_path):
    server, w0, w1, store = free_ports("127.0.0.1", 4)
    options = [
        f"--servers=127.0.0.1:{server}",
        f"--workers=127.0.0.1:{w0},127.0.0.1:{w1}",
        f"--store_port={store}",
    ]
    launcher = lh.start_job(tmp_path, options, PS_TRAIN)
    try:
        code, out, err = lh.finish(launcher)
    finally:
        lh.stop_launcher(launcher)
        lh.kill_leftovers(tmp_path)
    assert code == 0, err
    assert "shares no memory" not in err
    assert lh.recorded(tmp_path, "w") == {"worker.0": -LR * STEPS, "worker.1": -LR * STEPS}
