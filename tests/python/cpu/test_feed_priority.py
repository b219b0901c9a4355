"""DatasetBase.set_feed_priority changes only how the kernel schedules a pass's feed threads
(csrc/core/thread_priority.h), never what they feed: a pass trains, bit for bit, the same
parameters and fetch sums with "normal", "batch", "low" and "idle" feeds, from a QueueDataset and an
InMemoryDataset, in one trainer thread and in data-parallel replicas. (That the threads get the
priority is read back from /proc in tests/cpp/data/feed_priority_test.cc.)"""

import numpy as np
import pytest

import fleet
from fleet.dataset import FEED_PRIORITIES, DatasetFactory
from fleet.errors import InvalidArgument

from .test_data_parallel import STRATEGIES, _model, _params
from .test_data_parallel_feeds import _compiled, _rows, _write


def _dataset(kind, main, files, priority):
    ds = DatasetFactory().create_dataset(kind)
    block = main.global_block()
    ds.set_use_var([block.var("ids"), block.var("dense"), block.var("label")])
    ds.set_batch_size(8)
    ds.set_thread(1)  # one reader or producer: the batches come in file order
    ds.set_filelist(files)
    ds.set_feed_priority(priority)
    if kind == "InMemoryDataset":
        ds.load_into_memory()
    return ds


def _train(files, kind, priority, data_parallel):
    main, startup, loss = _model(lambda: fleet.optimizer.Adam(0.05), is_sparse=True)
    exe = fleet.Executor()
    scope = fleet._core.Scope()
    exe.run(startup, scope=scope)
    program = _compiled(main, loss, STRATEGIES[0]) if data_parallel else main
    for _ in range(2):  # two passes: the second reuses the in-memory data
        run = exe.train_from_dataset(
            program,
            _dataset(kind, main, files, priority),
            scope=scope,
            fetch_list=[loss],
            print_period=0,
        )
    return run.batches, run.fetch_sums[loss.name], _params(scope, main)


@pytest.mark.parametrize("kind", ["QueueDataset", "InMemoryDataset"])
@pytest.mark.parametrize("data_parallel", [False, True], ids=["one_thread", "replicas"])
def test_every_feed_priority_trains_the_same_values(tmp_path, kind, data_parallel):
    rng = np.random.default_rng(3)
    files = _write(tmp_path, [_rows(rng, 40), _rows(rng, 24)])
    batches, loss_sum, params = _train(files, kind, "normal", data_parallel)
    assert batches == 8
    for priority in ("batch", "low", "idle"):
        got_batches, got_loss_sum, got_params = _train(files, kind, priority, data_parallel)
        assert got_batches == batches, priority
        assert got_loss_sum == loss_sum, priority
        for name, value in params.items():
            np.testing.assert_array_equal(got_params[name], value, err_msg=f"{priority} {name}")


def test_unknown_feed_priority_is_refused():
    ds = DatasetFactory().create_dataset("QueueDataset")
    with pytest.raises(InvalidArgument, match="'high'"):
        ds.set_feed_priority("high")
    assert set(FEED_PRIORITIES) == {"normal", "batch", "low", "idle"}
