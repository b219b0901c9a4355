"""A restarted server is never trusted silently (issue 29): a parameter server SIGKILLed and
started again on the same endpoint under a running client comes back empty; the client's next
call to it fails naming the server and saying it restarted, instead of reading fresh rows (0.0
where the job had -10.0) and pushing on. A client that takes restarted servers
(``server_restarts``, a job's ``a_sync_configs["server_restarts"]``) goes on with a server that
reloaded the checkpoint before its port opened, says so, and still refuses one that came back
empty."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from fleet.errors import Unavailable
from fleet.launch.plan import free_ports
from fleet.ps import PsClient, server_config, write_server_config
from fleet.testing.ps_reference import sgd_sparse_table
from tests.python.e2e import launch_helpers as lh

pytestmark = pytest.mark.timeout(240)

TABLE = sgd_sparse_table(learning_rate=1.0)


def _start(config_path, address, ready, load=None):
    ready.unlink(missing_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "fleet.ps.server", "--config", str(config_path)]
        + ["--address", address, "--ready-file", str(ready)]
        + (["--load", str(load)] if load else []),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not ready.exists():
        assert proc.poll() is None, f"the server exited with {proc.returncode}"
        assert time.monotonic() < deadline, "the server did not start within 30 s"
        time.sleep(0.02)
    return proc


def test_a_server_restarted_under_a_client_fails_its_next_call_naming_it(tmp_path):
    config = tmp_path / "server.json"
    write_server_config(server_config(0, 1, [TABLE]), config)
    (port,) = free_ports("127.0.0.1", 1)
    address = f"127.0.0.1:{port}"
    ready = tmp_path / "ready"
    procs = [_start(config, address, ready)]
    try:
        client = PsClient([address], rpc_timeout=10.0)
        keys = np.array([7], np.int64)
        client.push_sparse(1, keys, np.full((1, 4), 10.0, np.float32))
        assert client.pull_sparse(1, keys).tolist() == [[-10.0] * 4]
        procs[0].kill()
        procs[0].wait(timeout=10)
        procs.append(_start(config, address, ready))
        restarted = time.monotonic()
        refusal = None
        while refusal is None:
            assert time.monotonic() - restarted < 15, "no call was refused within 15 s"
            try:
                rows = client.pull_sparse(1, keys)
            except Unavailable as e:
                if "restarted" in str(e):
                    refusal = str(e)
                continue  # gRPC is still reconnecting: try again
            raise AssertionError(f"the restarted server's rows were read: {rows.tolist()}")
        print(f"restart to the refusal: {time.monotonic() - restarted:.1f} s")
        assert "parameter server 0" in refusal and address in refusal, refusal
        # Every later call to it is refused too: nothing is pushed into the empty table.
        with pytest.raises(Unavailable, match="restarted"):
            client.push_sparse(1, keys, np.ones((1, 4), np.float32))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)


def _server_under_client(tmp_path):
    config = tmp_path / "server.json"
    write_server_config(server_config(0, 1, [TABLE]), config)
    (port,) = free_ports("127.0.0.1", 1)
    return config, f"127.0.0.1:{port}", tmp_path / "ready"


def _stop(procs):
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_a_client_that_takes_restarts_goes_on_with_a_server_that_reloaded_the_checkpoint(
    tmp_path, capfd
):
    config, address, ready = _server_under_client(tmp_path)
    checkpoint = tmp_path / "checkpoint"
    procs = [_start(config, address, ready)]
    try:
        client = PsClient([address], rpc_timeout=20.0, server_restarts=True)
        keys = np.array([7], np.int64)
        grad = np.full((1, 4), 10.0, np.float32)
        client.push_sparse(1, keys, grad)
        client.save(str(checkpoint))  # the row at -10
        client.push_sparse(1, keys, grad)  # -20, lost with the server
        procs[0].kill()
        procs[0].wait(timeout=10)
        # The server comes back a second later: the client's pull waits for it (within its RPC
        # timeout) instead of failing on the refused connection.
        puller = ThreadPoolExecutor(1)
        pulled = puller.submit(client.pull_sparse, 1, keys)
        time.sleep(1.0)
        procs.append(_start(config, address, ready, load=checkpoint))
        assert pulled.result(timeout=30).tolist() == [[-10.0] * 4]  # the checkpoint's row
        puller.shutdown()
        client.push_sparse(1, keys, np.ones((1, 4), np.float32))
        assert client.pull_sparse(1, keys).tolist() == [[-11.0] * 4]  # and the job goes on
        said = capfd.readouterr().err
        assert "parameter server 0 restarted under the running job" in said, said
        assert f"reloaded its tables from checkpoint {checkpoint}" in said, said
        assert said.count("reloaded its tables") == 1, said  # said once, not per call
        client.close()
    finally:
        _stop(procs)


def test_a_client_that_takes_restarts_refuses_a_server_that_came_back_empty(tmp_path):
    config, address, ready = _server_under_client(tmp_path)
    procs = [_start(config, address, ready)]
    try:
        client = PsClient([address], rpc_timeout=20.0, server_restarts=True)
        keys = np.array([7], np.int64)
        client.push_sparse(1, keys, np.full((1, 4), 10.0, np.float32))
        procs[0].kill()
        procs[0].wait(timeout=10)
        procs.append(_start(config, address, ready))
        with pytest.raises(Unavailable, match="restarted under the running job .* without loading"):
            client.pull_sparse(1, keys)
        with pytest.raises(Unavailable, match="parameter server 0"):
            client.push_sparse(1, keys, np.ones((1, 4), np.float32))
        client.close()
    finally:
        _stop(procs)


# A sync job of one server and two workers on the "w" model (w_model.py): after STEPS steps w is
# -LR * STEPS exactly. Both workers pause after step SAVE_AT, worker 0 having saved the
# checkpoint there, until the test has killed and restarted the server.
LR = 0.5
STEPS = 20
SAVE_AT = 9
JOB = f"""
from tests.python.e2e.w_model import start
# The workers' calls wait for the restarted server up to the RPC timeout: 90 s leaves a loaded
# machine time to start its Python and reload the checkpoint.
configs = {{"server_restarts": os.environ["SERVER_RESTARTS"] == "1", "rpc_timeout_s": 90}}
worker = start({LR}, configs, worker_timeout_s=60)
try:
    for step in range({STEPS}):
        worker.step()
        if step == {SAVE_AT}:
            # Worker 0's save; a flush on worker 1.
            fleet.save_persistables(worker.exe, os.environ["CHECKPOINT"])
            record("paused", time.time())
            while not (JOB_DIR / "go").exists():
                time.sleep(0.05)
except Exception as e:
    record("error", [time.time(), type(e).__name__, str(e)])
    raise
record("w", worker.w())
fleet.stop_worker()
"""


def _restart_job(tmp_path, server_restarts: bool, go_before_restart: bool, job: str = JOB):
    """Runs JOB with the server under a fleetrun of its own (its "machine", 127.0.0.2), kills
    that server while the workers pause, starts it again on its endpoint (a cluster manager's
    restart) with FLEET_RESTART_CHECKPOINT naming the job's checkpoint, and lets the workers go
    on (before the restart or once it listens). Returns the workers' fleetrun's (code, out,
    err), the time from "go" to its end, and the server's endpoint."""
    server_port, w0, w1, store = free_ports("127.0.0.2", 1) + free_ports("127.0.0.1", 3)
    endpoint = f"127.0.0.2:{server_port}"
    options = [
        f"--servers={endpoint}",
        f"--workers=127.0.0.1:{w0},127.0.0.1:{w1}",
        f"--store_port={store}",
    ]
    checkpoint = tmp_path / "checkpoint"
    env = dict(
        FLEET_JOB_ID="restarts",
        SERVER_RESTARTS="1" if server_restarts else "0",
        CHECKPOINT=str(checkpoint),
    )
    servers = [lh.start_job(tmp_path, [*options, "--host=127.0.0.2"], job, **env)]
    workers = lh.start_job(tmp_path, [*options, "--host=127.0.0.1"], job, **env)
    try:
        lh.wait_for_records(tmp_path, "paused", 2, [servers[0], workers])
        os.kill(lh.pids(tmp_path)["server.0"], signal.SIGKILL)
        code, out, err = lh.finish(servers[0], timeout=30)
        assert code != 0, err[-2000:]  # its fleetrun saw the kill
        (tmp_path / "pids" / "server.0").unlink()
        if go_before_restart:
            (tmp_path / "go").write_text("")
            went = time.monotonic()
            time.sleep(1.0)  # the workers' calls wait for the server
        env["FLEET_RESTART_CHECKPOINT"] = str(checkpoint)
        servers.append(lh.start_job(tmp_path, [*options, "--host=127.0.0.2"], job, **env))
        if not go_before_restart:
            lh.wait_for_pids(tmp_path, {"server.0"}, timeout=60)
            _wait_for_listener("127.0.0.2", server_port, servers[1])
            (tmp_path / "go").write_text("")
            went = time.monotonic()
        code, out, err = lh.finish(workers, timeout=120)
        ended = time.monotonic()
    finally:
        for launcher in [workers, *servers]:
            lh.stop_launcher(launcher)
        lh.kill_leftovers(tmp_path)
    return code, out, err, ended - went, endpoint


def _wait_for_listener(host, port, launcher, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((host, port), timeout=1).close()
            return
        except OSError:
            assert launcher.poll() is None, launcher.communicate()[1][-3000:]
            assert time.monotonic() < deadline, f"nothing listens on {host}:{port}"
            time.sleep(0.05)


def test_a_job_that_takes_restarts_goes_on_from_the_checkpoint_a_restarted_server_reloaded(
    tmp_path,
):
    code, out, err, took, endpoint = _restart_job(
        tmp_path, server_restarts=True, go_before_restart=True
    )
    print(f"the workers went on to the job's end in {took:.1f} s")
    assert code == 0, err[-3000:]
    # The checkpoint held SAVE_AT + 1 steps, the reloaded server took the rest: every worker
    # ends where an uninterrupted job ends, not where STEPS - SAVE_AT - 1 steps from an empty
    # table would.
    assert lh.recorded(tmp_path, "w") == {"worker.0": -LR * STEPS, "worker.1": -LR * STEPS}
    said = out + err
    assert f"at {endpoint}" in said and "reloaded its tables from checkpoint" in said, said[-3000:]


def test_a_job_that_does_not_take_restarts_fails_naming_the_restarted_server(tmp_path):
    code, out, err, took, endpoint = _restart_job(
        tmp_path, server_restarts=False, go_before_restart=False
    )
    print(f"the go to the failed job's end: {took:.1f} s")
    assert code != 0, err[-3000:]
    errors = lh.recorded(tmp_path, "error")
    first = min(errors.values())
    assert "parameter server 0 restarted under the running job" in first[2], first
    assert endpoint in first[2], first
    assert lh.recorded(tmp_path, "w") == {}
    # One refused call and the job's stop (fleetrun's grace period): well under a minute on a
    # loaded machine.
    assert took < 30, f"the job failed {took:.1f} s after the workers went on"


# JOB, where worker 1's process ends abruptly DIES_AT steps after the restarted server took over:
# os._exit(0), so that its connections drop as in a crash, while its fleetrun, which stops the
# job at a non-zero exit, leaves worker 0 to hear it from the server.
DIES_AT = SAVE_AT + 5
JOB_WORKER_1_DIES = JOB.replace(
    "        worker.step()",
    f"""        worker.step()
        if step == {DIES_AT} and fleet.worker_index() == 1:
            os._exit(0)""",
)


def test_a_reloaded_server_sees_the_workers_again_and_a_later_worker_death(tmp_path):
    """After an opted-in reload, the workers open their presence call to the new server too:
    when worker 1 then ends abruptly, the reloaded server fails worker 0's next step at once, naming
    worker 1 (without it, that server would know no worker's presence, and worker 0 would wait
    out the step timeout, 60 s, with "1 of 2 workers arrived")."""
    code, out, err, took, endpoint = _restart_job(
        tmp_path, server_restarts=True, go_before_restart=True, job=JOB_WORKER_1_DIES
    )
    assert code != 0, err[-3000:]
    errors = lh.recorded(tmp_path, "error")
    assert list(errors) == ["worker.0"], errors
    said = errors["worker.0"][2]
    assert "worker 1 failed (its connection from" in said, said
    assert "dropped before fleet.stop_worker()" in said, said
    assert "workers arrived within" not in said, said
