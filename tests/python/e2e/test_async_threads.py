"""Async parameter-server training with two trainer threads in one worker: a step reads one set of
dense values from its first op to its last. The async communicator installs refreshed dense
values at a thread's step boundary; with one copy of the parameters shared by the threads, one
thread's install landed in the middle of the other's step (this job failed 4 runs of 4 so), so
each thread reads a private copy now (distributed/detail/async_communicator.h)."""

from __future__ import annotations

import pytest

from tests.python.e2e import launch_helpers as lh

pytestmark = pytest.mark.timeout(180)

ROWS = 4096
BATCH = 64
DIM = 128
# Matmuls between the two reads of the weight: most of a step lies between them, and a step takes
# longer than the round trip a thread waits for at its boundary, so with a shared copy the other
# thread's install (at its step boundary) falls there in most steps.
CHAIN = 40

BODY = f"""
import fleet as F
from fleet import layers
main, startup = F.Program(), F.Program()
with F.program_guard(main, startup):
    x = layers.data("x", [{DIM}], dtype="float32")
    attr = F.ParamAttr(name="w", initializer=F.initializer.Uniform(-0.3, 0.3))
    # One weight, read by every layer of the chain.
    h = layers.fc(x, {DIM}, param_attr=attr, bias_attr=False, act="tanh")
    w = main.global_block().var("w")
    first = layers.reduce_sum(w)  # the weight as the step's first layer read it
    for _ in range({CHAIN}):
        h = layers.fc(h, {DIM}, param_attr=attr, bias_attr=False, act="tanh")
    last = layers.reduce_sum(w)  # and as its last one did
    diff = layers.elementwise_sub(last, first)
    torn = layers.elementwise_mul(diff, diff)
    loss = layers.reduce_mean(h)
    F.distributed_optimizer(F.optimizer.SGD(0.01),
                            F.DistributedStrategyFactory.create_async_strategy()
                            ).minimize(loss)
if F.is_server():
    F.init_server(); F.run_server(); sys.exit(0)
path = os.path.join(os.environ["FLEET_TEST_JOB_DIR"], "part-0")
rng = np.random.default_rng(0)
with open(path, "w") as f:
    for row in rng.uniform(-1, 1, size=({ROWS}, {DIM})):
        f.write("{DIM} " + " ".join(f"{{v:.4f}}" for v in row) + "\\n")
exe = F.Executor(F.CPUPlace())
exe.run(startup)
F.init_worker()
start = float(np.asarray(F.global_scope().find_var("w").get_tensor()).sum())
dataset = F.DatasetFactory().create_dataset("QueueDataset")
dataset.set_use_var([x])
dataset.set_batch_size({BATCH})
dataset.set_filelist([path])
result = exe.train_from_dataset(main, dataset, thread=2, fetch_list=[torn], print_period=0)
end = float(np.asarray(F.global_scope().find_var("w").get_tensor()).sum())
record("pass", dict(batches=result.batches, torn=result.fetch_sums[torn.name],
                    start=start, end=end))
F.stop_worker()
"""


def test_a_step_of_one_of_two_threads_reads_one_set_of_dense_values(tmp_path):
    result = lh.run_job(
        tmp_path,
        ["--server_num=1", "--worker_num=1"],
        BODY,
        timeout=150,
        FLEET_TEST_JOB_DIR=str(tmp_path),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    seen = lh.recorded(tmp_path, "pass")["worker.0"]
    assert seen["batches"] == ROWS // BATCH
    # Every step read the same weight first and last.
    assert seen["torn"] == 0.0, seen
    # Not vacuous: the weight moved during the pass, and the pass's end left the servers' values
    # (not a thread's private copy's) in the root scope for what follows (a save, evaluation).
    assert abs(seen["end"] - seen["start"]) > 1e-3, seen
