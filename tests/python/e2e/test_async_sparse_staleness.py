"""Async parameter-server training with a bound on the staleness of sparse rows
(a_sync_configs["max_sparse_staleness"] = S, distributed/detail/async_communicator.h): a worker's
pull of a table's rows includes every push of the table it queued but the last S.

One worker, one server, one embedding row read by every step, SGD whose every push moves the
row's sum by exactly -1: the sum a step pulls tells how many of the worker's earlier pushes the
servers had applied when it pulled. Executor.run steps and a one-thread dataset pass (where the
sparse prefetch would otherwise pull before the push is acknowledged) are both checked."""

from __future__ import annotations

import pytest

from tests.python.e2e import launch_helpers as lh

pytestmark = pytest.mark.timeout(180)

STEPS = 60
DIM = 4
# SGD's learning rate: a push of the gradient of sum(row) (1 in each of DIM columns) moves the
# row's sum by -LR * DIM = -1.
LR = 0.25

BODY = f"""
import fleet as F
from fleet import layers
main, startup = F.Program(), F.Program()
with F.program_guard(main, startup):
    ids = layers.data("ids", [1], dtype="int64")
    row = layers.embedding(ids, [16, {DIM}], is_sparse=True, param_attr=F.ParamAttr(name="emb"))
    total = layers.reduce_sum(row)
    strategy = F.DistributedStrategyFactory.create_async_strategy()
    strategy.a_sync_configs = {{"max_sparse_staleness": int(os.environ["TEST_SPARSE_S"])}}
    F.distributed_optimizer(F.optimizer.SGD({LR}), strategy).minimize(total)
if F.is_server():
    F.init_server(); F.run_server(); sys.exit(0)
exe = F.Executor(F.CPUPlace())
exe.run(startup)
F.init_worker()

def pulled(row_id):
    # The row's sum as this step pulled it (the step then pushes its gradient).
    feed = {{"ids": np.array([[row_id]], dtype=np.int64)}}
    return float(np.asarray(exe.run(main, feed=feed, fetch_list=[total])[0]).sum())

steps = [pulled(3) for _ in range({STEPS})]
# A dataset pass of one thread on row 5: {STEPS} steps, then a step that pulls after the pass's
# end flushed every push.
path = os.path.join(os.environ["JOB_DIR"], "ids.txt")
with open(path, "w") as f:
    f.write("1 5\\n" * {STEPS})
dataset = F.DatasetFactory().create_dataset("QueueDataset")
dataset.set_use_var([ids])
dataset.set_batch_size(1)
dataset.set_filelist([path])
result = exe.train_from_dataset(main, dataset, thread=1, fetch_list=[total], print_period=0)
record("pulls", dict(steps=steps, pass_batches=result.batches,
                     pass_sum=result.fetch_sums[total.name], after_pass=pulled(5)))
F.stop_worker()
"""


def run(tmp_path, bound: int) -> dict:
    result = lh.run_job(
        tmp_path,
        ["--server_num=1", "--worker_num=1"],
        BODY,
        timeout=150,
        TEST_SPARSE_S=str(bound),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return lh.recorded(tmp_path, "pulls")["worker.0"]


def pushes_seen(steps: list[float]) -> list[int]:
    """How many of the worker's pushes each step's pull included (step 0 pulled the initial row)."""
    return [round(steps[0] - s) for s in steps]


@pytest.mark.parametrize("bound", [0, 2])
def test_a_pull_includes_the_workers_pushes_but_the_last_s(tmp_path, bound):
    seen = run(tmp_path, bound)
    included = pushes_seen(seen["steps"])
    print(f"S={bound}: pushes each pull included {included}")
    for step, n in enumerate(included):
        assert step - bound <= n <= step, (step, included)
    if bound == 0:
        # The dataset pass: step t pulled the row after t pushes, and the pull after the pass
        # after all of them: sum over t of (start - t) with start = after_pass + STEPS.
        assert seen["pass_batches"] == STEPS
        start = seen["after_pass"] + STEPS
        expected = STEPS * start - STEPS * (STEPS - 1) / 2
        assert abs(seen["pass_sum"] - expected) < 0.05 * STEPS, (seen, expected)


def test_without_a_bound_pulls_lag_behind_the_pushes(tmp_path):
    """What the bound changes: Paddle's unbounded async lets a pull run ahead of the worker's own
    queued pushes (SGD merges up to 4 of them, waiting 10 ms for a fuller merge; 60 steps of a
    few hundred microseconds each leave some pull behind in every run)."""
    included = pushes_seen(run(tmp_path, -1)["steps"])
    print(f"no bound: pushes each pull included {included}")
    assert all(n <= step for step, n in enumerate(included)), included
    assert any(n < step for step, n in enumerate(included)), included
