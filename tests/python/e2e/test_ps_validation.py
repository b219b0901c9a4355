"""Bad configs, arguments and call orders on the parameter server give clear fleet.errors at
once: nothing allocated past the machine, no abort inside gRPC, no pybind11 TypeError, no wait
for the connect timeout, no barrier counting a bogus worker, no silent overflow to infinity.
Real server processes on 127.0.0.1 (in-process servers where the test is about them)."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from fleet.errors import InvalidArgument, NotFound, OutOfMemory, Unavailable
from fleet.proto import ps_pb2
from fleet.ps import PsClient, read_server_config, server_config, start_server
from fleet.testing.ps_cluster import REPO_ROOT
from fleet.testing.ps_reference import OPTIMIZERS, sgd_sparse_table
from tests.python import _ps_testing

pytestmark = pytest.mark.timeout(120)

SPARSE = sgd_sparse_table()


def test_dense_table_larger_than_memory_is_refused_before_allocating():
    huge = {
        "table_id": 2,
        "name": "huge",
        "type": "DENSE",
        "dim": 2**42,
        "optimizer": OPTIMIZERS["adam"],
    }
    start = time.monotonic()
    # Its own error, a MemoryError, not InvalidArgument: the config is fine for a larger machine.
    with pytest.raises(
        OutOfMemory,
        match=r"dense table 2 'huge' \(dim 4398046511104\): "
        r"[\d.]+ GiB needed on this server, but only",
    ):
        start_server(server_config(0, 1, [SPARSE, huge]))
    assert time.monotonic() - start < 5.0


@pytest.mark.parametrize("max_threads", [0, 1, -3])
def test_max_threads_below_two_is_refused(max_threads):
    with pytest.raises(InvalidArgument, match="max_threads must be in"):
        start_server(server_config(0, 1, [SPARSE]), max_threads=max_threads)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"rpc_timeout": -1},
            "rpc_timeout must be a finite number of seconds > 0 and at most a year, got -1",
        ),
        (
            {"connect_timeout": 0},
            "connect_timeout must be a finite number of seconds > 0 and at most a year, got 0",
        ),
        ({"admin_timeout": float("nan")}, "admin_timeout must be a finite number of seconds"),
        ({"max_keys_per_request": -5}, "max_keys_per_request must be at least 1, got -5"),
    ],
)
def test_bad_client_options_are_invalid_arguments(kwargs, message):
    with pytest.raises(InvalidArgument, match=message):
        PsClient(["127.0.0.1:1"], **kwargs)


@pytest.mark.parametrize(
    "endpoint", ["localhost", "127.0.0.1:99999", "a b:80", ":80", "127.0.0.1:-1", "host:port"]
)
def test_malformed_endpoint_fails_at_once(endpoint):
    start = time.monotonic()
    with pytest.raises(InvalidArgument, match="endpoint of server 0 .* is not host:port"):
        PsClient([endpoint], connect_timeout=30)
    # At once means long before the 30 s connect timeout; 10 s holds on a loaded machine.
    assert time.monotonic() - start < 10.0


def test_malformed_server_address_is_refused():
    with pytest.raises(InvalidArgument, match="parameter server address 'nowhere' is not"):
        start_server(server_config(0, 1, [SPARSE]), address="nowhere")


def test_garbage_binary_config_is_an_error_naming_the_file(tmp_path):
    path = tmp_path / "config.bin"
    path.write_bytes(np.random.default_rng(0).bytes(512))
    with pytest.raises(InvalidArgument, match=f"server config {path} is not a ServerConfig"):
        read_server_config(str(path))
    with pytest.raises(NotFound, match="does not exist"):
        read_server_config(str(tmp_path / "absent.bin"))
    good = tmp_path / "good.bin"
    good.write_bytes(server_config(0, 1, [SPARSE]).SerializeToString())
    assert read_server_config(str(good)).tables[0].dim == 4
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    proc = subprocess.run(
        [sys.executable, "-m", "fleet.ps.server", "--config", str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0 and str(path) in proc.stderr


def test_barrier_refuses_bad_and_repeated_worker_ids(ps_servers):
    cluster = ps_servers([SPARSE], 1)
    client = cluster.client()
    with pytest.raises(InvalidArgument, match=r"worker id 2 is not in \[0, 2\)"):
        client.barrier("b", 2, 2, timeout=5)
    with pytest.raises(InvalidArgument, match="timeout_s must be a finite number of seconds"):
        client.barrier("b", 2, 0, timeout=-1)
    # The server checks too (a request that skipped the client's checks).
    request = ps_pb2.BarrierRequest(name="raw", num_workers=2, worker_id=7, timeout_ms=1000)
    reply = ps_pb2.BarrierReply.FromString(
        _ps_testing.raw_call(cluster.endpoints[0], "Barrier", request.SerializeToString(), 10.0)
    )
    assert reply.status.code == 3 and "worker id 7 is not in [0, 2)" in reply.status.message

    # Two calls as worker 0 at once. Which reaches the server first is left to chance (a sleep
    # meant to order them lost on a loaded machine: a call that arrives after the repeat waits
    # and the repeat is refused instead). The refusal of one proves the other waits, so worker
    # 1 arrives only then, and releases it: the repeat was not counted.
    outcomes = queue.Queue()

    def arrive_as_worker_0():
        try:
            outcomes.put(client.barrier("b", 2, 0, 30))
        except Exception as e:  # any error: the asserts below say which was expected
            outcomes.put(e)

    calls = [threading.Thread(target=arrive_as_worker_0) for _ in range(2)]
    for call in calls:
        call.start()
    refused = outcomes.get(timeout=30)
    assert isinstance(refused, InvalidArgument), repr(refused)
    assert "worker id 0 is already waiting in this round" in str(refused)
    assert outcomes.empty()  # the other call still waits for worker 1
    client.barrier("b", 2, 1, timeout=10)
    for call in calls:
        call.join(timeout=10)
    assert outcomes.get_nowait() is None  # released by worker 1


def test_calls_on_a_closed_or_stopped_client_are_clear_errors(ps_servers):
    cluster = ps_servers([SPARSE], 1)
    keys = np.arange(3, dtype=np.int64)
    closed = cluster.client()
    closed.close()
    closed.close()
    with pytest.raises(Unavailable, match="is closed"):
        closed.pull_sparse(1, keys)
    client = cluster.client()
    client.stop_servers()
    for call in (
        lambda: client.pull_sparse(1, keys),
        client.stats,
        lambda: client.save("/tmp/never"),
    ):
        with pytest.raises(Unavailable, match="stopped by this client"):
            call()
    assert cluster.procs[0].wait(timeout=10) == 0


def test_in_process_server_stops_serving_after_stop_servers():
    server = start_server(server_config(0, 1, [SPARSE]))
    try:
        PsClient([server.endpoint]).stop_servers()
        assert server.wait_for_stop_request(0)
        # The server's own thread closes the port once it sees the request; on a loaded machine
        # a connection may still get in before it does, so allow it a few seconds to close.
        deadline = time.monotonic() + 10.0
        while True:
            try:
                PsClient([server.endpoint], connect_timeout=1.0)
            except Unavailable as error:
                assert server.endpoint in str(error)
                break
            assert time.monotonic() < deadline, "the server still serves 10 s after stop_servers"
            time.sleep(0.1)
    finally:
        server.shutdown(0)


def _table(table_id, kind, optimizer, overflow=None, dim=4):
    table = {
        "table_id": table_id,
        "name": f"t{table_id}",
        "type": kind,
        "dim": dim,
        "optimizer": optimizer,
        "initializer": {"seed": 1, "zero": {}},
    }
    if overflow:
        table["overflow"] = overflow
    return table


def test_updates_that_overflow_are_refused_or_clipped(ps_servers):
    big_lr = {"learning_rate": 1e30, "sgd": {}}
    tables = [
        _table(1, "SPARSE", big_lr),
        _table(2, "SPARSE", OPTIMIZERS["adagrad"]),
        _table(3, "SPARSE", {"learning_rate": 1.0, "sgd": {}}, {"action": "CLIP", "max_abs": 100}),
        _table(4, "DENSE", big_lr, dim=10),
    ]
    client = ps_servers(tables, 2).client()
    keys = np.array([5, 6, 7], np.int64)
    grads = np.ones((3, 4), np.float32)
    grads[1] = 1e10  # finite, but lr * g overflows float
    with pytest.raises(
        InvalidArgument,
        match=r"sparse table 1 't1': the update of key 6 would "
        r"take a weight .* past 3.4\d*e\+38",
    ):
        client.push_sparse(1, keys, grads)
    rows = client.pull_sparse(1, keys)
    np.testing.assert_array_equal(rows[1], 0)  # refused: left as it was
    np.testing.assert_array_equal(rows[[0, 2]], np.float32(-1e30))  # the others applied
    # Adagrad: g * g overflows the accumulator (the weight itself would stay finite).
    with pytest.raises(InvalidArgument, match="table 2 't2': the update of key 6"):
        client.push_sparse(2, keys, grads * 1e10)
    client.push_sparse(3, keys, np.full((3, 4), 1e3, np.float32))
    np.testing.assert_array_equal(client.pull_sparse(3, keys), -100)  # clipped
    with pytest.raises(InvalidArgument, match=r"dense table 4 't4': the update of block 0"):
        client.push_dense(4, np.full(10, 1e10, np.float32))
    np.testing.assert_array_equal(client.pull_dense(4), 0)
