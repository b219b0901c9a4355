"""A restarted server is never trusted silently (issue 29): a parameter server SIGKILLed and
started again on the same endpoint under a running client comes back empty; the client's next
call to it fails naming the server and saying it restarted, instead of reading fresh rows (0.0
where the job had -10.0) and pushing on. A client that takes restarted servers
(``server_restarts``, a job's ``a_sync_configs["server_restarts"]``) goes on with a server that
reloaded the checkpoint before its port opened, says so, and still refuses one that came back
empty."""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from fleet.errors import Unavailable
from fleet.launch.plan import free_ports
from fleet.ps import PsClient, server_config, write_server_config
from fleet.testing.ps_reference import OPTIMIZERS

pytestmark = pytest.mark.timeout(120)

TABLE = {
    "table_id": 1,
    "name": "emb",
    "type": "SPARSE",
    "dim": 4,
    "optimizer": {**OPTIMIZERS["sgd"], "learning_rate": 1.0},
    "initializer": {"seed": 1, "zero": {}},
}


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
