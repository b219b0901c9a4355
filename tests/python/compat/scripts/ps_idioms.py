# A small parameter-server script written as Paddle 2.x users write it (paddle.distributed.fleet
# with a static program), ported by its imports. argv: mode, scenario, out dir.
#   order:   fleet.init_worker() before exe.run(fleet.startup_program), then train and save
#   first:   the first worker alone saves (persistables and inference model) while the other
#            trains on and stops
#   every:   every worker calls save_persistables / save_inference_model
#   stopped: a save after stop_worker()
#   file:    a save into a path that is a file, from every worker
#   fluid_io: the first worker saves and exports through fluid.io (Paddle 1.x's spelling)
#   mismatch: the workers in different every-worker calls (worker 0 in load_model, worker 1 in
#            stop_worker): worker 0's timeout names both calls
import json
import os
import sys

import numpy as np

import fleet  # was: import paddle.distributed.fleet as fleet
import fleet as fluid  # was: import paddle.fluid as fluid (paddle.static)

mode, scenario, out = sys.argv[1], sys.argv[2], sys.argv[3]

fleet.init()
ids = fluid.layers.data(name="ids", shape=[1], dtype="int64", lod_level=1)
x = fluid.layers.data(name="x", shape=[4], dtype="float32")
label = fluid.layers.data(name="label", shape=[1], dtype="int64")
emb = fluid.layers.embedding(input=ids, size=[1000, 4], is_sparse=True)
pooled = fluid.layers.sequence_pool(input=emb, pool_type="sum")
hidden = fluid.layers.fc(input=fluid.layers.concat([pooled, x], axis=1), size=8, act="relu")
predict = fluid.layers.fc(input=hidden, size=2, act="softmax")
loss = fluid.layers.mean(fluid.layers.cross_entropy(input=predict, label=label))

strategy = fleet.DistributedStrategy()
strategy.a_sync = mode != "sync"
if mode == "geo":
    strategy.a_sync_configs = {"k_steps": 4}
if mode == "half_async":  # 1.x's StrategyFactory: 2.x has no switch of its own for it
    strategy = fleet.DistributedStrategyFactory.create_half_async_strategy()
optimizer = fleet.distributed_optimizer(fluid.optimizer.SGD(learning_rate=0.05), strategy)
optimizer.minimize(loss)


def batch(step, worker):
    rng = np.random.default_rng(step * 10 + worker)
    n = 16
    tensor = fluid.create_lod_tensor(
        rng.integers(0, 1000, (n, 1)).astype(np.int64), [[1] * n], fluid.CPUPlace()
    )
    xs = rng.standard_normal((n, 4)).astype(np.float32)
    return {"ids": tensor, "x": xs, "label": (xs[:, :1] > 0).astype(np.int64)}


def record(name, value):
    with open(os.path.join(out, f"{name}.{fleet.worker_index()}.json"), "w") as f:
        json.dump(value, f)


if fleet.is_server():
    fleet.init_server()
    fleet.run_server()
else:
    exe = fluid.Executor(fluid.CPUPlace())
    if scenario == "order":
        fleet.init_worker()
        exe.run(fleet.startup_program)
    else:
        exe.run(fleet.startup_program)
        fleet.init_worker()
    worker = fleet.worker_index()
    # In "first", the other worker trains on while the first saves (sync mode's step barrier
    # needs equal step counts: there it stops while the first saves).
    steps = 40 if scenario == "first" and worker != 0 and mode != "sync" else 8
    for step in range(steps):
        exe.run(fleet.main_program, feed=batch(step, worker), fetch_list=[loss])
    save_dir = os.path.join(out, "ckpt")
    export_dir = os.path.join(out, "export")
    if scenario in ("order", "first"):
        if fleet.is_first_worker():
            fleet.save_persistables(exe, save_dir)
            fleet.save_inference_model(exe, export_dir, ["ids", "x"], [predict])
        record("done", {"steps": steps})
        fleet.stop_worker()
    elif scenario == "fluid_io":
        if fleet.is_first_worker():
            fluid.io.save_persistables(exe, save_dir, fleet.main_program)
            fluid.io.save_inference_model(
                export_dir, ["ids", "x"], [predict], exe, fleet.main_program
            )
        record("done", {"steps": steps})
        fleet.stop_worker()
    elif scenario == "every":
        fleet.save_persistables(exe, save_dir)
        fleet.save_inference_model(exe, export_dir, ["ids", "x"], [predict])
        record("done", {"steps": steps})
        fleet.stop_worker()
    elif scenario == "stopped":
        fleet.stop_worker()
        try:
            fleet.save_persistables(exe, save_dir)
            record("error", {"type": "none"})
        except Exception as e:  # the test checks the words
            record("error", {"type": type(e).__name__, "message": str(e)})
    elif scenario == "mismatch":
        fleet.barrier_worker()
        if fleet.is_first_worker():
            fleet.save_persistables(exe, save_dir)
            try:
                fleet.load_model(save_dir, timeout=10)
                record("error", {"type": "none"})
            except Exception as e:
                record("error", {"type": type(e).__name__, "message": str(e)})
        fleet.stop_worker(timeout=60)
    elif scenario == "file":
        path = os.path.join(out, "a_file")
        with open(path, "a"):
            pass
        try:
            fleet.save_persistables(exe, path)
            record("error", {"type": "none"})
        except Exception as e:
            record("error", {"type": type(e).__name__, "message": str(e)})
        fleet.stop_worker()
