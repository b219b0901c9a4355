"""A linear model whose weight has its own learning rate (ParamAttr(learning_rate=0.5)) and
whose bias has the optimizer's, trained with SGD for a few steps either in one process (--single)
or as the only worker of a PS job under fleetrun (--mode sync / async / geo). Writes the final
parameters to --out (an .npz). With one worker every mode's final values equal one process's."""

from __future__ import annotations

import argparse

import numpy as np

import fleet
from fleet import layers
from fleet.ps import PsClient
from fleet.ps.program_pass import DENSE_TABLE_ID

IN, BATCH, WEIGHT_RATE = 3, 4, 0.5


def batch(step: int) -> dict:
    rng = np.random.default_rng(step)
    x = rng.normal(size=(BATCH, IN)).astype(np.float32)
    y = rng.normal(size=(BATCH, 1)).astype(np.float32)
    return {"x": x, "y": y}


def build():
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        x = layers.data("x", [IN])
        y = layers.data("y", [1])
        weight = fleet.ParamAttr(
            name="w", initializer=fleet.initializer.Constant(0.1), learning_rate=WEIGHT_RATE
        )
        bias = fleet.ParamAttr(name="b", initializer=fleet.initializer.Constant(0.0))
        pred = layers.fc(x, 1, param_attr=weight, bias_attr=bias)
        diff = layers.elementwise_sub(pred, y)
        loss = layers.mean(layers.elementwise_mul(diff, diff))
    return main, startup, loss


def values() -> dict:
    scope = fleet.global_scope()
    return {name: scope.find_var(name).get_tensor().numpy().copy() for name in ("w", "b")}


def served(dense: list) -> dict:
    """The servers' values of the dense parameters (the packed dense table, split)."""
    table = PsClient(fleet.server_endpoints()).pull_dense(DENSE_TABLE_ID)
    return {d.param: table[d.offset : d.offset + d.numel] for d in dense}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--mode", default="sync")
    parser.add_argument("--single", action="store_true")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    main_prog, startup, loss = build()
    exe = fleet.Executor(fleet.CPUPlace())
    optimizer = fleet.optimizer.SGD(0.1)
    if args.single:
        with fleet.program_guard(main_prog, startup):
            optimizer.minimize(loss)
        exe.run(startup)
        for step in range(args.steps):
            exe.run(main_prog, feed=batch(step), fetch_list=[loss])
        np.savez(args.out, **values())
        return 0
    fleet.init()
    strategy = {
        "sync": fleet.DistributedStrategyFactory.create_sync_strategy(),
        "async": fleet.DistributedStrategyFactory.create_async_strategy(),
        "geo": fleet.DistributedStrategyFactory.create_geo_strategy(2),
    }[args.mode]
    with fleet.program_guard(main_prog, startup):
        fleet.distributed_optimizer(optimizer, strategy).minimize(loss)
    if fleet.is_server():
        fleet.init_server()
        fleet.run_server()
        return 0
    exe.run(fleet.startup_program)
    fleet.init_worker()
    for step in range(args.steps):
        exe.run(fleet.main_program, feed=batch(step), fetch_list=[loss])
    fleet.flush_worker()  # every update (GEO: every delta) is on the servers
    np.savez(args.out, **served(fleet.fleet_api.instance.ps_plan.dense))
    fleet.stop_worker()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
