"""Sync steps of workers that share memory with their servers: the step's dense values come back
through the shared segment instead of the barrier's reply (BarrierRequest.shm_segment). Two
workers' steps (PsClient's sync_step_and_pull_dense, against server processes) return the values
of the same steps over TCP bit for bit, and their replies carry no values; and a sync job with
a_sync_configs["local_transport"] = "shm" ends with the parameters of the same job over TCP, bit
for bit, with 1 and 2 server processes (fleetrun on 127.0.0.1, tests/python/e2e/scripts/
ps_equivalence.py: a sparse embedding and a dense fc, Adam)."""

from __future__ import annotations

import pathlib
import subprocess
import threading

import numpy as np
import pytest

from fleet import _core
from fleet.ps import PsClient
from fleet.testing.ps_cluster import start_servers
from tests.python.e2e import launch_helpers as lh

SCRIPT = pathlib.Path(__file__).parent / "scripts" / "ps_equivalence.py"

pytestmark = pytest.mark.timeout(180)

DIM = 5000  # 5 blocks of 1024 floats, dealt over the servers
DENSE = {
    "table_id": 1,
    "name": "dense",
    "type": "DENSE",
    "dim": DIM,
    "dense_block_size": 1024,
    "optimizer": {"learning_rate": 1e-2, "adam": {}},
    "initializer": {"constant": {"value": 0.1}},
}
STEPS = 6


def _train(client: PsClient, worker: int, out: list, errors: list) -> None:
    """Worker `worker`'s STEPS sync steps of a 2-worker job; appends each step's values."""
    try:
        for step in range(STEPS):
            grads = np.sin(np.arange(DIM, dtype=np.float32) * (step + 1) + worker)
            values = np.empty(DIM, np.float32)
            done = client.core_client.sync_step_and_pull_dense(
                1, grads.astype(np.float32), values, 2, worker, 60.0
            )
            assert done == 0
            out.append(values)
    except Exception as error:  # noqa: BLE001 - reported by the test's thread
        errors.append(error)


def _job_steps(workers: list) -> list:
    """Both workers' steps, in a thread each (a step waits for the other worker)."""
    seen, errors = [[] for _ in workers], []
    threads = [
        threading.Thread(target=_train, args=(client, w, seen[w], errors))
        for w, client in enumerate(workers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    return seen


def _barrier_bytes_received(client: PsClient) -> int:
    kinds = _core.monitoring.client_rpcs(client.core_client).kinds
    return next(k.bytes_received for k in kinds if k.kind == "barrier")


@pytest.mark.parametrize("num_servers", [1, 2])
def test_two_workers_sync_steps_through_shared_memory_return_the_values_of_tcp_bit_for_bit(
    tmp_path, num_servers
):
    (tmp_path / "tcp").mkdir()
    (tmp_path / "shm").mkdir()
    with (
        start_servers(tmp_path / "tcp", [DENSE], num_servers) as tcp,
        start_servers(tmp_path / "shm", [DENSE], num_servers) as shm,
    ):
        host = shm.endpoints[0].rsplit(":", 1)[0]
        tcp_workers = [tcp.client() for _ in range(2)]
        shm_workers = [
            PsClient(shm.endpoints, local_host=host, local_socket=False, local_shared_memory=True)
            for _ in range(2)
        ]
        try:
            assert all(c.shared_memory(s) for c in shm_workers for s in range(num_servers))
            expected, got = _job_steps(tcp_workers), _job_steps(shm_workers)
            # The values came through the segments: the shared-memory steps' replies together
            # hold fewer bytes than one step's values, the TCP steps' every step's.
            for client in shm_workers:
                assert _barrier_bytes_received(client) < DIM * 4
            for client in tcp_workers:
                assert _barrier_bytes_received(client) >= STEPS * DIM * 4
        finally:
            for client in tcp_workers + shm_workers:
                client.close()
    for w in range(2):
        assert len(got[w]) == len(expected[w]) == STEPS
        for step in range(STEPS):
            assert np.array_equal(
                expected[w][step].view(np.uint32), got[w][step].view(np.uint32)
            ), f"worker {w}, step {step}"
            assert np.array_equal(got[0][step].view(np.uint32), got[w][step].view(np.uint32))
    assert not np.array_equal(got[0][0], got[0][-1])  # the steps moved the values


def _sync_job(job_dir: pathlib.Path, servers: int, transport: str) -> tuple[dict, str]:
    """The parameters a 2-worker sync job with `transport` ends with, and its launcher's stderr."""
    job_dir.mkdir(parents=True, exist_ok=True)
    out = job_dir / "ps.npz"
    result = subprocess.run(
        lh.launcher_command(
            [f"--server_num={servers}", "--worker_num=2", f"--log_dir={job_dir / 'logs'}"],
            SCRIPT,
            *("--optimizer", "adam", "--steps", "6", "--local_transport", transport),
            *("--out", str(out)),
        ),
        env=lh.job_env(job_dir),
        cwd=lh.REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=150,
    )
    logs = "".join(p.read_text() for p in sorted((job_dir / "logs").glob("*log*")) if p.is_file())
    assert result.returncode == 0, result.stdout + result.stderr + logs
    return dict(np.load(out)), result.stderr + logs


@pytest.mark.parametrize("servers", [1, 2])
def test_a_sync_job_through_shared_memory_ends_with_the_parameters_of_tcp_bit_for_bit(
    tmp_path, servers
):
    tcp, _ = _sync_job(tmp_path / "tcp", servers, "off")
    shm, shm_logs = _sync_job(tmp_path / "shm", servers, "shm")
    # Every worker mapped its servers' segments (else it says so and keeps the wire).
    assert "shares no memory" not in shm_logs
    assert set(shm) == set(tcp)
    for name in tcp:
        assert shm[name].dtype == tcp[name].dtype, name
        np.testing.assert_array_equal(
            shm[name].view(np.uint32) if shm[name].dtype == np.float32 else shm[name],
            tcp[name].view(np.uint32) if tcp[name].dtype == np.float32 else tcp[name],
            err_msg=name,
        )
    # The dense weight (worker 0's, brought back by its last step) and the rows trained.
    dense = [name for name in tcp if name not in ("ids", "rows")]
    assert dense and all(np.abs(tcp[name]).max() > 1e-3 for name in dense)
    assert np.abs(tcp["rows"]).max() > 1e-3
