"""The CPU best-practice document's parameter-server section, ported by its imports: a 1.x fleet
job (fleet.init() from fleetrun's environment, a sync strategy, fleet.main_program) whose
workers compile the main program with data parallelism from the strategy's build and execution
strategies (CPU_NUM replicas a worker). Each worker trains STEPS batches of its own, then writes
the dense parameters and the sparse rows the servers hold to $OUT_DIR/worker.<index>.json."""

import json
import os

import numpy as np

import fleet  # was: from paddle.fluid.incubate.fleet.parameter_server... import fleet
import fleet as fluid  # was: import paddle.fluid as fluid
from fleet import fleet_api
from fleet.ps.client import PsClient

STEPS, BATCH, VOCAB = 4, 8, 20


def build(fluid):  # noqa: ANN001, ANN201 (the module, to build the reference in a test too)
    ids = fluid.layers.data(name="ids", shape=[1], dtype="int64", lod_level=1)
    x = fluid.layers.data(name="x", shape=[3], dtype="float32")
    y = fluid.layers.data(name="y", shape=[1], dtype="float32")
    emb = fluid.layers.embedding(
        input=ids,
        size=[VOCAB, 4],
        is_sparse=True,
        param_attr=fluid.ParamAttr(name="emb", initializer=fluid.initializer.Constant(0.0)),
    )
    pooled = fluid.layers.sequence_pool(input=emb, pool_type="sum")
    hidden = fluid.layers.fc(
        input=fluid.layers.concat([pooled, x], axis=1),
        size=8,
        act="relu",
        param_attr=fluid.ParamAttr(name="w1"),
        bias_attr=fluid.ParamAttr(name="b1"),
    )
    pred = fluid.layers.fc(input=hidden, size=1, param_attr=fluid.ParamAttr(name="w2"))
    diff = fluid.layers.elementwise_sub(pred, y)
    return fluid.layers.mean(fluid.layers.elementwise_mul(diff, diff))


def batch(step, worker):  # noqa: ANN001, ANN201
    rng = np.random.default_rng(100 * step + worker)
    return {
        "ids": fluid.LoDTensor(
            rng.integers(0, VOCAB, size=(2 * BATCH, 1)).astype(np.int64), lengths=[[2] * BATCH]
        ),
        "x": rng.standard_normal((BATCH, 3)).astype(np.float32),
        "y": rng.standard_normal((BATCH, 1)).astype(np.float32),
    }


def main():  # noqa: ANN201
    fluid.default_startup_program().random_seed = 6
    fleet.init()
    loss = build(fluid)
    strategy = fleet.DistributedStrategyFactory.create_sync_strategy()
    optimizer = fleet.distributed_optimizer(fluid.optimizer.SGD(learning_rate=0.1), strategy)
    optimizer.minimize(loss)
    if fleet.is_server():
        fleet.init_server()
        fleet.run_server()
        return
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fleet.startup_program)
    fleet.init_worker()
    compiled_prog = fluid.compiler.CompiledProgram(fleet.main_program).with_data_parallel(
        loss_name=loss.name,
        build_strategy=strategy.get_build_strategy(),
        exec_strategy=strategy.get_execute_strategy(),
    )
    for step in range(STEPS):
        exe.run(compiled_prog, feed=batch(step, fleet.worker_index()), fetch_list=[loss.name])
    scope = fluid.global_scope()
    out = {n: np.array(scope.find_var(n).get_tensor()).tolist() for n in ("w1", "b1", "w2")}
    with PsClient(fleet.server_endpoints()) as client:  # test instrumentation
        table = fleet_api.instance.ps_plan.sparse[0].table_id
        out["emb"] = client.pull_sparse(table, np.arange(VOCAB, dtype=np.int64)).tolist()
    path = os.path.join(os.environ["OUT_DIR"], f"worker.{fleet.worker_index()}.json")
    with open(path, "w") as f:
        json.dump(out, f)
    fleet.stop_worker()


if __name__ == "__main__":
    main()
