"""Async dense gradients sent and values installed at a trainer thread's step boundary, with
in-process servers on 127.0.0.1: in a dataset pass of one thread the thread's dense parameters
become views of the staged buffer (no copy); the gradients are gathered straight into the
memory shared with the servers when the client has it, else into a buffer sent on the wire.
Sync steps write the values their barrier replies bring straight into the root scope's
parameters, which view one packed buffer. Either way every step must read exactly the values the
servers held after this worker's previous gradient (async with max_dense_staleness 0, one
worker), each parameter at its own offset, and an op that writes a parameter in place must
change that step's values only."""

from __future__ import annotations

import numpy as np
import pytest

import fleet
from fleet import _core, layers
from fleet.ps import PsClient, server_config, start_server

LR = 0.5
W_SHAPE, B_SHAPE = (2, 3), (5,)  # packed as w at [0, 6), b at [6, 11)
DENSE = int(np.prod(W_SHAPE)) + int(np.prod(B_SHAPE))


@pytest.fixture(params=[(1, False), (1, True), (2, True)], ids=["wire", "shm", "shm_2_servers"])
def dense_cluster(request):
    """Servers holding one dense table of DENSE floats in blocks of 4 (SGD at LR, zeros), so
    that 2 servers split every parameter, and a client of them over the wire or through shared
    memory."""
    num_servers, shared_memory = request.param
    table = {
        "table_id": 0,
        "type": "DENSE",
        "dim": DENSE,
        "dense_block_size": 4,
        "optimizer": {"learning_rate": LR, "sgd": {}},
        "initializer": {"zero": {}},
    }
    servers = [start_server(server_config(i, num_servers, [table])) for i in range(num_servers)]
    try:
        client = PsClient(
            [s.endpoint for s in servers],
            local_host="127.0.0.1" if shared_memory else "",
            local_shared_memory=shared_memory,
        )
        assert [client.shared_memory(i) for i in range(num_servers)] == [shared_memory] * len(
            servers
        )
        yield client
        client.close()
    finally:
        for server in servers:
            server.shutdown(1.0)


def _program(scale_w_in_place: bool):
    """g_w = w + 1 and g_b = 0.5 b + 1 (so a value read at the wrong offset shows), sent as the
    dense gradients; with scale_w_in_place, w *= 0.5 first, in place."""
    main = fleet.Program()
    with fleet.program_guard(main, fleet.Program()):
        x = layers.data("x", [2])
    block = main.global_block()
    for name, shape in (("w", W_SHAPE), ("b", B_SHAPE)):
        block.create_var(name, shape=list(shape), persistable=True)
        block.create_var(f"{name}@GRAD", shape=list(shape))
    if scale_w_in_place:
        block.append_op("scale", inputs={"X": "w"}, outputs={"Out": "w"}, attrs={"scale": 0.5})
    block.append_op(
        "scale", inputs={"X": "w"}, outputs={"Out": "w@GRAD"}, attrs={"scale": 1.0, "bias": 1.0}
    )
    block.append_op(
        "scale", inputs={"X": "b"}, outputs={"Out": "b@GRAD"}, attrs={"scale": 0.5, "bias": 1.0}
    )
    block.append_op("send", inputs={"X": ["w@GRAD", "b@GRAD"]}, attrs={"table_id": 0})
    return main, x


def _expected(steps: int, scale_w_in_place: bool) -> np.ndarray:
    """The servers' values after `steps` steps that each read the values of the step before, in
    float32 as the kernels and the SGD rule compute them."""
    lr, half, one = np.float32(LR), np.float32(0.5), np.float32(1.0)
    w = np.zeros(W_SHAPE, np.float32)
    b = np.zeros(B_SHAPE, np.float32)
    for _ in range(steps):
        read_w = w * half if scale_w_in_place else w
        w = w - lr * (read_w * one + one)
        b = b - lr * (b * half + one)
    return np.concatenate([w.ravel(), b.ravel()])


def _communicator(client, scope, mode):
    config = _core.distributed.CommunicatorConfig()
    config.mode = getattr(_core.distributed.PsMode, mode)
    config.worker_id, config.num_workers = 0, 1
    config.dense_table_id = 0
    config.dense = [
        _core.distributed.DenseVar("w", "w@GRAD", 0, int(np.prod(W_SHAPE))),
        _core.distributed.DenseVar("b", "b@GRAD", int(np.prod(W_SHAPE)), int(np.prod(B_SHAPE))),
    ]
    config.send_queue_size, config.max_merge_var_num, config.send_wait_times = 4, 1, 0
    config.thread_pool_size = 1
    config.independent_recv = False
    config.max_dense_staleness = 0
    config.step_timeout_s = 10.0
    resources = _core.RuntimeResources()
    comm = _core.distributed.Communicator(config, client._core, scope)
    comm.attach(resources)
    return fleet.Executor(fleet.CPUPlace(), resources=resources), comm


def _dataset(tmp_path, x, samples: int):
    path = tmp_path / "part-0"
    path.write_text("".join(f"2 {i}.0 1.0\n" for i in range(samples)))
    dataset = fleet.DatasetFactory().create_dataset("QueueDataset")
    dataset.set_use_var([x])
    dataset.set_batch_size(1)
    dataset.set_filelist([str(path)])
    return dataset


@pytest.mark.parametrize("mode", ["ASYNC", "SYNC"])
@pytest.mark.parametrize("scale_w_in_place", [False, True], ids=["reads", "writes_in_place"])
def test_one_thread_passes_read_the_values_of_the_step_before(
    dense_cluster, tmp_path, scale_w_in_place, mode
):
    """Two dataset passes of one thread (async: the staged buffers are installed as views, then
    retired and reused), 12 steps each: the servers end where 24 chained steps end, and the root
    scope holds their values after the pass."""
    client = dense_cluster
    main, x = _program(scale_w_in_place)
    dataset = _dataset(tmp_path, x, samples=12)
    scope = _core.Scope()
    with fleet.scope_guard(scope):
        scope.var("w").get_tensor().set(np.zeros(W_SHAPE, np.float32))
        scope.var("b").get_tensor().set(np.zeros(B_SHAPE, np.float32))
        exe, comm = _communicator(client, scope, mode)
        comm.start()
        for passes in (1, 2):
            result = exe.train_from_dataset(main, dataset, thread=1, print_period=0)
            assert result.batches == 12
            expected = _expected(12 * passes, scale_w_in_place)
            np.testing.assert_array_equal(client.pull_dense(0), expected)
            root = [scope.find_var(n).get_tensor().numpy().ravel() for n in ("w", "b")]
            np.testing.assert_array_equal(np.concatenate(root), expected)
        comm.stop()
    if mode == "ASYNC":
        # Every step but the first of each pass may wait for its refresh, and some did.
        assert 0 < comm.trainer_waits["dense_refresh"] <= 24
