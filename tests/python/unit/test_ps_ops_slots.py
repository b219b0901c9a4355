"""pull_sparse and push_sparse over several slots of one table (the PS pass fuses every lookup
of a table into one op: CTR-DNN's 26 slots), against an in-process server on 127.0.0.1.

The op gives each slot's Out a view of one buffer of rows that the communicator fills (an
async prefetch hands over its own buffer), and hands the gathered gradients to the communicator
to keep: these tests check that every slot gets exactly the servers' rows, that a step's
outputs are not written by the next step, and that every slot's gradients reach the rows."""

from __future__ import annotations

import numpy as np
import pytest

import fleet
from fleet import _core
from tests.python.unit.ps_ops_config import communicator_config

DIM = 3  # the row width of the sparse table of conftest.py's cluster fixture
SLOTS = ("ids_a", "ids_b", "ids_c")


def _communicator(client, scope, mode: str, prefetch_sparse: bool = True):
    config = communicator_config(mode, SLOTS, DIM, prefetch_sparse=prefetch_sparse)
    resources = _core.RuntimeResources()
    comm = _core.distributed.Communicator(config, client._core, scope)
    comm.attach(resources)
    return fleet.Executor(fleet.CPUPlace(), resources=resources), comm


def _program(padding_idx: int = -1, push: bool = True, grads_from_outs: bool = False):
    """One pull_sparse of the three slots; push_sparse of the fed gradients ("grad_*"), or of
    zeros computed from the outputs (grads_from_outs: the rows never change)."""
    main = fleet.Program()
    block = main.global_block()
    int64 = fleet._dtypes.to_dtype("int64")
    slots = [block.create_var(s, shape=[-1, 1], dtype=int64, lod_level=1) for s in SLOTS]
    outs = [block.create_var(f"out_{s[-1]}", shape=[-1, DIM]) for s in SLOTS]
    grads = [block.create_var(f"grad_{s[-1]}", shape=[-1, DIM]) for s in SLOTS]
    block.create_var("w", shape=[2, 2], persistable=True)
    block.create_var("w@GRAD", shape=[2, 2])
    block.append_op(
        "pull_sparse",
        inputs={"Ids": slots},
        outputs={"Out": outs},
        attrs={"table_id": 1, "dim": DIM, "padding_idx": padding_idx, "is_test": False},
    )
    if grads_from_outs:
        for out, grad in zip(outs, grads):
            block.append_op("scale", inputs={"X": out}, outputs={"Out": grad}, attrs={"scale": 0.0})
    if push:
        block.append_op(
            "push_sparse",
            inputs={"Ids": slots, "Grad": grads},
            attrs={"table_id": 1, "dim": DIM, "padding_idx": padding_idx},
        )
        block.append_op("send", inputs={"X": ["w@GRAD"]}, attrs={"table_id": 0})
    return main, slots


def _feed(ids: list[np.ndarray], grads: list[np.ndarray]) -> dict:
    feed = {"w@GRAD": np.zeros((2, 2), np.float32)}
    for name, slot_ids, grad in zip(SLOTS, ids, grads):
        feed[name] = fleet.LoDTensor(slot_ids.reshape(-1, 1), lengths=[[len(slot_ids)]])
        feed[f"grad_{name[-1]}"] = grad
    return feed


@pytest.mark.parametrize("mode", ["async", "half_async"])
@pytest.mark.parametrize("padding_idx", [-1, 0])
def test_every_slot_gets_the_servers_rows_and_pushes_its_gradients(cluster, mode, padding_idx):
    server, client = cluster
    rng = np.random.default_rng(7)
    # Slots of different lengths sharing ids (9 in two slots, 2**40 twice in one), and id 0,
    # which is padding when padding_idx is 0.
    ids = [
        np.array([9, 2**40, 0, 2**40], np.int64),
        np.array([-5], np.int64),
        np.array([9, 0, 123456789], np.int64),
    ]
    grads = [rng.standard_normal((len(i), DIM)).astype(np.float32) for i in ids]
    every = np.concatenate(ids)
    before = {int(k): row for k, row in zip(every, client.pull_sparse(1, every))}
    scope = _core.Scope()
    main, _ = _program(padding_idx)
    with fleet.scope_guard(scope):
        scope.var("w").get_tensor().set(np.zeros((2, 2), np.float32))
        exe, comm = _communicator(client, scope, mode)
        comm.start()
        outs = exe.run(main, feed=_feed(ids, grads), fetch_list=["out_a", "out_b", "out_c"])
        comm.stop()
    for slot_ids, out in zip(ids, outs):
        assert out.shape == (len(slot_ids), DIM)
        for k, row in zip(slot_ids, out):
            if k == padding_idx:
                np.testing.assert_array_equal(row, np.zeros(DIM, np.float32))
            else:
                np.testing.assert_array_equal(row, before[int(k)])
    # SGD at rate 1: each row moved by the sum of its gradients over every slot; padding rows
    # got none.
    expected = {k: row.copy() for k, row in before.items()}
    for slot_ids, grad in zip(ids, grads):
        for k, g in zip(slot_ids, grad):
            if k != padding_idx:
                expected[int(k)] -= g
    keys = np.array(sorted(expected), np.int64)
    after = client.pull_sparse(1, keys)
    for k, row in zip(keys, after):
        np.testing.assert_allclose(row, expected[int(k)], rtol=1e-6, atol=1e-6)
        if k == padding_idx:
            np.testing.assert_array_equal(row, before[int(k)])


def test_a_steps_outputs_are_not_written_by_the_next_steps_pull(cluster):
    """The outputs are views of a buffer each pull fills anew: reshapes of the first step's
    outputs (views of the same memory) keep its rows after a second step pulls other rows
    into the same output variables. A pull that wrote into the outputs' old memory, as the op
    did before it gave them the communicator's buffer, changes them."""
    server, client = cluster
    ids_1 = [np.array([1, 2], np.int64), np.array([3], np.int64), np.array([4, 5], np.int64)]
    ids_2 = [np.array([6, 7], np.int64), np.array([8], np.int64), np.array([9, 10], np.int64)]
    rows_1 = client.pull_sparse(1, np.concatenate(ids_1))
    rows_2 = client.pull_sparse(1, np.concatenate(ids_2))
    assert not np.array_equal(rows_1, rows_2)
    zeros = [np.zeros((len(i), DIM), np.float32) for i in ids_1]
    first, _ = _program(push=False)
    block = first.global_block()
    for s in SLOTS:
        block.create_var(f"view_{s[-1]}", shape=[-1, DIM])
        block.append_op(
            "reshape",
            inputs={"X": f"out_{s[-1]}"},
            outputs={"Out": f"view_{s[-1]}"},
            attrs={"shape": [-1, DIM]},
        )
    second, _ = _program(push=False)
    scope = _core.Scope()
    with fleet.scope_guard(scope):
        scope.var("w").get_tensor().set(np.zeros((2, 2), np.float32))
        exe, comm = _communicator(client, scope, "async")
        comm.start()
        exe.run(first, feed=_feed(ids_1, zeros))
        exe.run(second, feed=_feed(ids_2, zeros))
        outs = [scope.find_var(f"out_{s[-1]}").get_tensor().numpy() for s in SLOTS]
        views = [scope.find_var(f"view_{s[-1]}").get_tensor().numpy() for s in SLOTS]
        comm.stop()
    np.testing.assert_array_equal(np.concatenate(outs), rows_2)
    np.testing.assert_array_equal(np.concatenate(views), rows_1)


@pytest.mark.parametrize("prefetch", [True, False])
def test_a_dataset_pass_over_several_slots_reads_the_servers_rows(cluster, tmp_path, prefetch):
    """train_from_dataset with the async prefetch: the next batch's rows of all three slots are
    pulled in one request while the current batch runs, and the op's outputs are that request's
    buffer. Zero gradients keep the rows, so every batch must read exactly the servers' rows."""
    server, client = cluster
    rng = np.random.default_rng(5)
    lengths = rng.integers(1, 4, size=(48, len(SLOTS)))
    lines, every = [], []
    for row in lengths:
        fields = []
        for n in row:
            slot_ids = rng.integers(-(2**40), 2**40, size=n)
            every.append(slot_ids)
            fields.append(f"{n} " + " ".join(str(k) for k in slot_ids))
        lines.append(" ".join(fields) + "\n")
    path = tmp_path / "part-0"
    path.write_text("".join(lines))
    main, slots = _program(grads_from_outs=True, push=True)
    main.global_block().ops.pop()  # no dense send: the program has no dense gradient
    dataset = fleet.DatasetFactory().create_dataset("QueueDataset")
    dataset.set_use_var(slots)
    dataset.set_batch_size(4)
    dataset.set_filelist([str(path)])
    scope = _core.Scope()
    with fleet.scope_guard(scope):
        scope.var("w").get_tensor().set(np.zeros((2, 2), np.float32))
        exe, comm = _communicator(client, scope, "async", prefetch_sparse=prefetch)
        comm.start()
        result = exe.train_from_dataset(
            main, dataset, thread=1, print_period=0, fetch_list=["out_a", "out_b", "out_c"]
        )
        comm.stop()
    assert result.batches == 12
    if prefetch:
        assert 1 <= comm.prefetched_pulls <= 11
    else:
        assert comm.prefetched_pulls == 0
    rows = client.pull_sparse(1, np.concatenate(every))
    total = sum(result.fetch_sums[f"out_{s[-1]}"] for s in SLOTS)
    assert total == pytest.approx(float(rows.astype(np.float64).sum()), rel=1e-5)
