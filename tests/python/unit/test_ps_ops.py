"""The parameter-server ops (pull_sparse, push_sparse, send) against NumPy, with an in-process
server on 127.0.0.1 and a communicator attached to one executor's resources: what the kernels
pull is what the servers hold, what they push changes the rows by the known SGD update, and an
executor without a communicator names what is missing."""

from __future__ import annotations

import time

import numpy as np
import pytest

import fleet
from fleet import _core
from fleet.errors import InvalidArgument, Unavailable
from tests.python.unit.ps_ops_config import communicator_config

DIM = 3  # the row width of the sparse table of conftest.py's cluster fixture


def _program(padding_idx: int = -1):
    main = fleet.Program()
    block = main.global_block()
    ids = block.create_var("ids", shape=[-1, 1], dtype=fleet._dtypes.to_dtype("int64"), lod_level=1)
    out = block.create_var("out", shape=[-1, DIM])
    grad = block.create_var("grad", shape=[-1, DIM])
    block.create_var("w", shape=[2, 2], persistable=True)
    block.create_var("w@GRAD", shape=[2, 2])
    block.append_op(
        "pull_sparse",
        inputs={"Ids": ids},
        outputs={"Out": out},
        attrs={"table_id": 1, "dim": DIM, "padding_idx": padding_idx, "is_test": False},
    )
    block.append_op(
        "push_sparse",
        inputs={"Ids": ids, "Grad": grad},
        attrs={"table_id": 1, "dim": DIM, "padding_idx": padding_idx},
    )
    block.append_op("send", inputs={"X": ["w@GRAD"]}, attrs={"table_id": 0})
    return main


def _config(
    mode,
    max_dense_staleness,
    prefetch_sparse,
    send_queue_size,
    max_merge_var_num,
    send_wait_times,
    ids=("ids",),
):
    return communicator_config(
        mode,
        ids,
        DIM,
        max_dense_staleness=max_dense_staleness,
        prefetch_sparse=prefetch_sparse,
        send_queue_size=send_queue_size,
        max_merge_var_num=max_merge_var_num,
        send_wait_times=send_wait_times,
    )


def _executor(
    client,
    scope,
    mode="half_async",
    max_dense_staleness=0,
    prefetch_sparse=True,
    send_queue_size=4,
    max_merge_var_num=1,
    send_wait_times=0,
):
    resources = _core.RuntimeResources()
    comm = _core.distributed.Communicator(
        _config(
            mode,
            max_dense_staleness,
            prefetch_sparse,
            send_queue_size,
            max_merge_var_num,
            send_wait_times,
        ),
        client._core,
        scope,
    )
    comm.attach(resources)
    return fleet.Executor(fleet.CPUPlace(), resources=resources), comm


def test_pull_push_and_send_match_the_servers(cluster):
    server, client = cluster
    scope = _core.Scope()
    ids = np.array([[2**40], [-7], [2**40]], dtype=np.int64)
    before = client.pull_sparse(1, ids[:, 0])
    with fleet.scope_guard(scope):
        w = scope.var("w")
        w.get_tensor().set(np.zeros((2, 2), np.float32))
        exe, comm = _executor(client, scope)
        comm.start()
        grad = np.array([[1, 2, 3], [4, 5, 6], [1, 1, 1]], np.float32)
        (out,) = exe.run(
            _program(),
            feed={
                "ids": fleet.LoDTensor(ids, lengths=[[3]]),
                "grad": grad,
                "w@GRAD": np.full((2, 2), 2.0, np.float32),
            },
            fetch_list=["out"],
        )
        comm.stop()
    np.testing.assert_array_equal(out, before)
    after = client.pull_sparse(1, np.array([2**40, -7]))
    # SGD with learning rate 1: repeated ids' gradients are summed before the update.
    np.testing.assert_allclose(after[0], before[0] - (grad[0] + grad[2]), rtol=1e-6)
    np.testing.assert_allclose(after[1], before[1] - grad[1], rtol=1e-6)
    # send: the dense table moved by lr * grad, and the root scope received the new values.
    np.testing.assert_allclose(client.pull_dense(0), -np.ones(4), rtol=1e-6)
    np.testing.assert_allclose(scope.find_var("w").get_tensor().numpy().ravel(), -np.ones(4))


@pytest.mark.parametrize("staleness", [0, 1])
def test_async_steps_start_from_dense_values_at_most_the_bound_behind(cluster, staleness):
    """max_dense_staleness S: step k reads dense values that include every gradient of this
    worker but the last S (the dense table is SGD with lr 0.5 and every gradient is 2, so after
    j applied gradients w = -j)."""
    server, client = cluster
    scope = _core.Scope()
    ids = np.array([[3]], dtype=np.int64)
    seen = []
    with fleet.scope_guard(scope):
        scope.var("w").get_tensor().set(np.zeros((2, 2), np.float32))
        exe, comm = _executor(client, scope, mode="async", max_dense_staleness=staleness)
        comm.start()
        for _ in range(30):
            (w,) = exe.run(
                _program(),
                feed={
                    "ids": fleet.LoDTensor(ids, lengths=[[1]]),
                    "grad": np.zeros((1, DIM), np.float32),
                    "w@GRAD": np.full((2, 2), 2.0, np.float32),
                },
                fetch_list=["w"],
            )
            seen.append(float(w.ravel()[0]))
        comm.stop()
    for step, value in enumerate(seen):
        applied = -value
        assert applied == int(applied), seen  # whole gradients only: no torn values
        assert step - staleness <= applied <= step, (step, seen)
    np.testing.assert_allclose(client.pull_dense(0), np.full(4, -30.0))
    # What the trainer waited for: Executor.run steps are not prefetched, so each of the 30
    # pulls its rows from the servers at the step; at most every step waited for its refresh.
    waits = comm.trainer_waits
    assert waits["sparse_pull"] == 30, waits
    assert waits["sparse_prefetch"] == 0, waits
    assert 0 <= waits["dense_refresh"] <= 30, waits


def test_the_sender_never_waits_for_more_gradients_than_the_queue_holds(cluster):
    """SGD tables merge up to max_merge_var_num gradients, waiting send_wait_times x 10 ms for
    them; with a queue of one gradient the trainer is blocked while the queue is full, so such
    a wait could only time out: here 1 s a step (10 steps took 10 s before the fix)."""
    server, client = cluster
    scope = _core.Scope()
    ids = np.array([[3]], dtype=np.int64)
    with fleet.scope_guard(scope):
        scope.var("w").get_tensor().set(np.zeros((2, 2), np.float32))
        exe, comm = _executor(
            client,
            scope,
            mode="async",
            send_queue_size=1,
            max_merge_var_num=4,
            send_wait_times=100,
        )
        comm.start()
        start = time.monotonic()
        for _ in range(10):
            exe.run(
                _program(),
                feed={
                    "ids": fleet.LoDTensor(ids, lengths=[[1]]),
                    "grad": np.ones((1, DIM), np.float32),
                    "w@GRAD": np.zeros((2, 2), np.float32),
                },
            )
        comm.flush()
        seconds = time.monotonic() - start
        comm.stop()
    assert seconds < 5.0, f"10 steps took {seconds:.1f}s: the sender waited for a full merge"


def test_padding_rows_are_zero_and_get_no_gradient(cluster):
    server, client = cluster
    scope = _core.Scope()
    scope.var("w").get_tensor().set(np.zeros((2, 2), np.float32))
    ids = np.array([[0], [9]], dtype=np.int64)
    before = client.pull_sparse(1, np.array([0, 9]))
    with fleet.scope_guard(scope):
        exe, comm = _executor(client, scope)
        comm.start()
        (out,) = exe.run(
            _program(padding_idx=0),
            feed={
                "ids": fleet.LoDTensor(ids, lengths=[[2]]),
                "grad": np.ones((2, DIM), np.float32),
                "w@GRAD": np.zeros((2, 2), np.float32),
            },
            fetch_list=["out"],
        )
        comm.stop()
    np.testing.assert_array_equal(out[0], np.zeros(DIM))
    np.testing.assert_array_equal(out[1], before[1])
    after = client.pull_sparse(1, np.array([0, 9]))
    np.testing.assert_array_equal(after[0], before[0])
    np.testing.assert_allclose(after[1], before[1] - 1.0, rtol=1e-6)


def test_an_executor_without_a_communicator_names_init_worker():
    scope = _core.Scope()
    scope.var("w").get_tensor().set(np.zeros((2, 2), np.float32))
    exe = fleet.Executor(fleet.CPUPlace(), resources=_core.RuntimeResources())
    with pytest.raises(Unavailable, match="init_worker"):
        exe.run(
            _program(),
            feed={
                "ids": fleet.LoDTensor(np.array([[1]]), lengths=[[1]]),
                "grad": np.ones((1, DIM), np.float32),
                "w@GRAD": np.zeros((2, 2), np.float32),
            },
            scope=scope,
        )


@pytest.mark.parametrize("prefetch,push", [(True, False), (True, True), (False, False)])
def test_an_async_dataset_pass_pulls_each_next_batch_while_the_current_one_runs(
    cluster, tmp_path, prefetch, push
):
    """train_from_dataset announces a thread's next batch; the async communicator pulls its rows
    once the current batch's gradients of the table are queued (with no push in the program: at
    the pull), and the batch's pull_sparse takes those rows: the same rows a pull would get (the
    pushed gradients are zeros, so the rows never change). prefetch_sparse=False pulls at the
    step."""
    server, client = cluster
    rng = np.random.default_rng(3)
    ids = rng.integers(-(2**40), 2**40, size=(64, 2))
    path = tmp_path / "part-0"
    path.write_text("".join(f"2 {a} {b}\n" for a, b in ids))
    main = fleet.Program()
    block = main.global_block()
    slot = block.create_var(
        "ids", shape=[-1, 1], dtype=fleet._dtypes.to_dtype("int64"), lod_level=1
    )
    block.create_var("out", shape=[-1, DIM])
    block.append_op(
        "pull_sparse",
        inputs={"Ids": slot},
        outputs={"Out": "out"},
        attrs={"table_id": 1, "dim": DIM, "padding_idx": -1, "is_test": False},
    )
    if push:
        block.create_var("zero_grad", shape=[-1, DIM])
        block.append_op(
            "scale", inputs={"X": "out"}, outputs={"Out": "zero_grad"}, attrs={"scale": 0.0}
        )
        block.append_op(
            "push_sparse",
            inputs={"Ids": slot, "Grad": "zero_grad"},
            attrs={"table_id": 1, "dim": DIM, "padding_idx": -1},
        )
    dataset = fleet.DatasetFactory().create_dataset("QueueDataset")
    dataset.set_use_var([slot])
    dataset.set_batch_size(4)
    dataset.set_filelist([str(path)])
    scope = _core.Scope()
    with fleet.scope_guard(scope):
        scope.var("w").get_tensor().set(np.zeros((2, 2), np.float32))
        exe, comm = _executor(client, scope, mode="async", prefetch_sparse=prefetch)
        comm.start()
        result = exe.train_from_dataset(main, dataset, thread=1, print_period=0, fetch_list=["out"])
        comm.stop()
    assert result.batches == 16
    # The first batch has no batch before it; the others are prefetched when the reader is
    # ahead of the trainer, as it is on all but a loaded machine.
    if prefetch:
        assert 1 <= comm.prefetched_pulls <= 15
    else:
        assert comm.prefetched_pulls == 0
    # Every batch not served from a prefetch pulled from the servers at its step, and only a
    # served prefetch can have been waited for.
    waits = comm.trainer_waits
    assert waits["sparse_pull"] == 16 - comm.prefetched_pulls, waits
    assert 0 <= waits["sparse_prefetch"] <= comm.prefetched_pulls, waits
    expected = client.pull_sparse(1, ids.ravel()).sum()
    assert result.fetch_sums["out"] == pytest.approx(expected, rel=1e-5)


def test_an_async_prefetch_without_id_variables_is_refused(cluster):
    """The prefetcher takes each table's id variables from the plan; a config without them
    would never prefetch, so the communicator refuses it, naming the table."""
    _, client = cluster
    config = _config("async", 0, True, 4, 1, 0, ids=())
    with pytest.raises(InvalidArgument, match=r"table 1 \('emb'\) names no id variables"):
        _core.distributed.Communicator(config, client._core, _core.Scope())
    config.prefetch_sparse = False  # nothing to configure without the prefetch
    assert _core.distributed.Communicator(config, client._core, _core.Scope()).prefetched_pulls == 0
