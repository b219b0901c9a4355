"""An update rule that differs between roles is refused at init_worker (issue 29), as a differing
dimension is: a script whose servers build SGD and whose workers build Adam fails on the workers
with an error naming the table and both rules, instead of training with a rule nobody asked for."""

from __future__ import annotations

import pytest

from tests.python.e2e import launch_helpers as lh

pytestmark = pytest.mark.timeout(120)

BODY = """
import fleet as fl
from fleet import layers
main, startup = fl.Program(), fl.Program()
with fl.program_guard(main, startup):
    ids = layers.data("ids", [1], dtype="int64", lod_level=1)
    emb = layers.embedding(ids, size=[100, 4], is_sparse=True,
                           param_attr=fl.ParamAttr(name="emb"))
    loss = layers.mean(layers.sequence_pool(emb, "sum"))
    rule = fl.optimizer.SGD(0.1) if fl.is_server() else fl.optimizer.Adam(0.01)
    strategy = fl.DistributedStrategyFactory.create_async_strategy()
    fl.distributed_optimizer(rule, strategy).minimize(loss)
if fl.is_server():
    fl.init_server()
    fl.run_server()
    sys.exit(0)
exe = fl.Executor(fl.CPUPlace())
exe.run(fl.startup_program)
fl.init_worker()
record("trained", True)
fl.stop_worker()
"""


def test_a_worker_whose_rule_differs_from_the_servers_is_refused_naming_both(tmp_path):
    result = lh.run_job(tmp_path, ["--server_num=1", "--worker_num=1"], BODY)
    assert result.returncode != 0
    assert "fleet.init_worker(): table" in result.stderr, result.stderr
    assert "sgd" in result.stderr and "adam" in result.stderr, result.stderr
    assert lh.recorded(tmp_path, "trained") == {}
