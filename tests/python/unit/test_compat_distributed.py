"""The optimizers and learning-rate schedules of issue 24 under fleet.distributed_optimizer: in a
collective job (a group of one rank, in process) they run after the gradients' all-reduce and
train; in a parameter-server job an optimizer without a server-side rule in Paddle's parameter
server is refused with the rules the servers have."""

from __future__ import annotations

import numpy as np
import pytest

import fleet
from fleet import _core, layers
from fleet.base.distributed_optimizer import DistributedOptimizer
from fleet.base.distributed_strategy import DistributedStrategy, DistributedStrategyFactory
from fleet.base.fleet_base import Fleet
from fleet.errors import InvalidArgument
from fleet.role_maker import Role, UserDefinedRoleMaker

NEW_OPTIMIZERS = {
    "rmsprop": lambda lr: fleet.optimizer.RMSProp(lr, momentum=0.5, centered=True),
    "ftrl": lambda lr: fleet.optimizer.Ftrl(lr),
    "adamax": lambda lr: fleet.optimizer.Adamax(lr),
    "lamb": lambda lr: fleet.optimizer.Lamb(lr, lamb_weight_decay=0.0),
    "decayed_adagrad": lambda lr: fleet.optimizer.DecayedAdagrad(lr),
}


def _model():
    main, startup = fleet.Program(), fleet.Program()
    main.random_seed = startup.random_seed = 3
    with fleet.program_guard(main, startup):
        x = layers.data("x", [4])
        label = layers.data("label", [1])
        logit = layers.fc(layers.fc(x, 8, act="relu"), 1)
        loss = layers.mean(layers.sigmoid_cross_entropy_with_logits(logit, label))
    return main, startup, loss


@pytest.fixture
def one_rank():
    facade = Fleet()
    facade.init(UserDefinedRoleMaker(current_id=0, worker_num=1, is_collective=True))
    yield facade
    facade.collective_runtime.close()


@pytest.mark.parametrize("name", sorted(NEW_OPTIMIZERS))
def test_each_new_optimizer_with_a_decayed_rate_trains_in_a_collective_job(one_rank, name):
    main, startup, loss = _model()
    with fleet.program_guard(main, startup):
        lr = layers.exponential_decay(0.05, decay_steps=20, decay_rate=0.5)
    strategy = DistributedStrategy()
    strategy.fuse_all_reduce_ops = False
    DistributedOptimizer(one_rank, NEW_OPTIMIZERS[name](lr), strategy).minimize(loss, startup)
    types = [op.type for op in main.global_block().ops]
    assert types[0] == "increment"
    assert max(i for i, t in enumerate(types) if t == "c_allreduce_sum") < types.index(name)
    exe = fleet.Executor(fleet.CPUPlace(), resources=one_rank.runtime_resources)
    scope = _core.Scope()
    exe.run(startup, scope=scope)
    rng = np.random.default_rng(1)
    losses = []
    for _ in range(30):
        x = rng.standard_normal((32, 4)).astype(np.float32)
        label = (x[:, :1] + x[:, 1:2] > 0).astype(np.float32)
        (value,) = exe.run(main, feed={"x": x, "label": label}, fetch_list=[loss], scope=scope)
        losses.append(float(value.reshape(-1)[0]))
    assert np.mean(losses[-5:]) < np.mean(losses[:5]), losses


@pytest.mark.parametrize("name", sorted(NEW_OPTIMIZERS))
def test_a_parameter_server_job_names_the_rules_its_servers_have(name):
    facade = Fleet()
    facade.init(
        UserDefinedRoleMaker(
            current_id=0, role=Role.WORKER, worker_num=1, server_endpoints=["127.0.0.1:1"]
        )
    )
    main, startup, loss = _model()
    strategy = DistributedStrategyFactory.create_async_strategy()
    optimizer = DistributedOptimizer(facade, NEW_OPTIMIZERS[name](0.1), strategy)
    with pytest.raises(
        InvalidArgument, match="no server-side update rule; use SGD, Adagrad or Adam"
    ):
        optimizer.minimize(loss, startup)


def test_nce_sparse_weight_gradient_goes_to_the_dense_table_whole():
    facade = Fleet()
    facade.init(
        UserDefinedRoleMaker(
            current_id=0, role=Role.WORKER, worker_num=1, server_endpoints=["127.0.0.1:1"]
        )
    )
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        words = [layers.data(f"w{i}", [1], dtype="int64") for i in range(2)]
        emb = layers.embedding(words[0], size=[50, 8], param_attr="embed", is_sparse=True)
        loss = layers.mean(layers.nce(emb, words[1], 50, num_neg_samples=3, is_sparse=True))
    strategy = DistributedStrategyFactory.create_async_strategy()
    DistributedOptimizer(facade, fleet.optimizer.SGD(0.1), strategy).minimize(loss, startup)
    block = main.global_block()
    (nce_grad,) = [op for op in block.ops if op.type == "nce_grad"]
    assert nce_grad.attrs["is_sparse"] is False
    (weight_grad,) = nce_grad.output("Weight@GRAD")
    assert block.var(weight_grad).kind == fleet.framework.LOD_TENSOR
    (send,) = [op for op in block.ops if op.type == "send"]
    assert weight_grad in send.input("X")
