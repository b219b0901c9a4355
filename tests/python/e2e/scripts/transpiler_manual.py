"""The distributed-training manual's DistributeTranspiler example (fluid 1.x), ported by its
import line: the role and endpoints come from PADDLE_TRAINING_ROLE, PADDLE_PSERVER_IPS,
PADDLE_PSERVER_PORT, PADDLE_TRAINERS, PADDLE_CURRENT_IP and PADDLE_TRAINER_ID as the manual
reads them. A trainer trains STEPS batches (its half of each step's batch: every trainer's data
differs) and writes its parameters, with the sparse rows the servers hold, to
$OUT_DIR/trainer.<id>.json."""

import json
import os

import numpy as np

import fleet as fluid
from fleet.ps.client import PsClient

STEPS, HALF_BATCH, VOCAB, DIM = 5, 6, 20, 3


def build(fluid):  # noqa: ANN001, ANN201 (the module, to build the reference in a test too)
    x = fluid.layers.data(name="x", shape=[4], dtype="float32")
    y = fluid.layers.data(name="y", shape=[1], dtype="float32")
    ids = fluid.layers.data(name="ids", shape=[1], dtype="int64", lod_level=1)
    emb = fluid.layers.embedding(
        ids,
        size=[VOCAB, DIM],
        is_sparse=True,
        param_attr=fluid.ParamAttr(name="emb", initializer=fluid.initializer.Constant(0.0)),
    )
    pooled = fluid.layers.sequence_pool(emb, "sum")
    hidden = fluid.layers.fc(
        input=fluid.layers.concat([x, pooled], axis=1),
        size=8,
        act="relu",
        param_attr=fluid.ParamAttr(name="w1"),
        bias_attr=fluid.ParamAttr(name="b1"),
    )
    pred = fluid.layers.fc(
        input=hidden, size=1, param_attr=fluid.ParamAttr(name="w2"), bias_attr=False
    )
    diff = fluid.layers.elementwise_sub(pred, y)  # square_error_cost, which Fleet lacks
    loss = fluid.layers.mean(fluid.layers.elementwise_mul(diff, diff))
    fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
    return loss


def batch(step, trainer_id):  # noqa: ANN001, ANN201
    """Trainer `trainer_id`'s half of step `step`'s batch (the same in every process)."""
    rng = np.random.default_rng(1000 * step + trainer_id)
    ids = rng.integers(0, VOCAB, size=(2 * HALF_BATCH, 1)).astype(np.int64)
    return {
        "x": rng.standard_normal((HALF_BATCH, 4)).astype(np.float32),
        "y": rng.standard_normal((HALF_BATCH, 1)).astype(np.float32),
        "ids": fluid.LoDTensor(ids, lengths=[[2] * HALF_BATCH]),
    }


def main():  # noqa: ANN201
    fluid.default_startup_program().random_seed = 9
    loss = build(fluid)

    role = os.getenv("PADDLE_TRAINING_ROLE")
    port = os.getenv("PADDLE_PSERVER_PORT", "6174")
    pserver_ips = os.getenv("PADDLE_PSERVER_IPS", "")
    eplist = []
    for ip in pserver_ips.split(","):
        eplist.append(":".join([ip, port]))
    pserver_endpoints = ",".join(eplist)
    trainers = int(os.getenv("PADDLE_TRAINERS"))
    current_endpoint = os.getenv("PADDLE_CURRENT_IP", "") + ":" + port
    trainer_id = int(os.getenv("PADDLE_TRAINER_ID", "0"))

    exe = fluid.Executor(fluid.CPUPlace())
    t = fluid.DistributeTranspiler()
    t.transpile(trainer_id, pservers=pserver_endpoints, trainers=trainers)
    if role == "PSERVER":
        pserver_prog = t.get_pserver_program(current_endpoint)
        startup_prog = t.get_startup_program(current_endpoint, pserver_prog)
        exe.run(startup_prog)
        exe.run(pserver_prog)
    elif role == "TRAINER":
        trainer_prog = t.get_trainer_program()
        exe.run(fluid.default_startup_program())
        for step in range(STEPS):
            exe.run(trainer_prog, feed=batch(step, trainer_id), fetch_list=[loss])
        # Test instrumentation: the rows the servers hold now.
        with PsClient(eplist) as client:
            emb = client.pull_sparse(t.plan.sparse[0].table_id, np.arange(VOCAB, dtype=np.int64))
        scope = fluid.global_scope()
        params = {n: np.array(scope.find_var(n).get_tensor()).tolist() for n in ("w1", "b1", "w2")}
        params["emb"] = np.asarray(emb).tolist()
        out = os.path.join(os.environ["OUT_DIR"], f"trainer.{trainer_id}.json")
        with open(out, "w") as f:
            json.dump(params, f)


if __name__ == "__main__":
    main()
