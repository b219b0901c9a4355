"""The sync "w" model of the PS job tests, for their job scripts (run by fleetrun, after
launch_helpers.PREAMBLE has called fleet.init()): one dense weight w, initial 0, and
loss = mean(w * x) fed x = 1. Every sync step moves w by -lr whatever the number of workers, so
after n steps w is -lr * n exactly when lr is a power of two: a lost, doubled or foreign gradient
shows as another w.

A job script is then `worker = start(LR)`, a loop of `worker.step()`, and `record("w", worker.w())`;
what a test does around the steps (pause, fail, save, record) stays in its own script."""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import numpy as np

import fleet as fl
from fleet import layers


@dataclasses.dataclass(frozen=True)
class Worker:
    """A worker of the job, started (init_worker done) with the model built."""

    exe: fl.Executor
    loss: Any

    def step(self) -> None:
        """One sync step on the batch x = [[1]]."""
        feed = {"x": np.ones((1, 1), np.float32)}
        self.exe.run(fl.main_program, feed=feed, fetch_list=[self.loss])

    def w(self) -> float:
        """The worker's w now."""
        return float(fl.global_scope().find_var("w").get_tensor().numpy().ravel()[0])


def start(
    lr: float, a_sync_configs: dict | None = None, worker_timeout_s: float | None = None
) -> Worker:
    """Builds the model and its sync SGD(lr) optimizer (strategy.a_sync_configs set to
    `a_sync_configs` when given). A server then serves until the job stops it and exits the
    process with 0; a worker runs the startup program, joins the job (fl.init_worker, with
    `worker_timeout_s` as its timeout when given) and gets its Worker."""
    main, startup = fl.Program(), fl.Program()
    with fl.program_guard(main, startup):
        x = layers.data("x", [1])
        w = fl.ParamAttr(name="w", initializer=fl.initializer.Constant(0.0))
        y = layers.fc(x, 1, bias_attr=False, param_attr=w)
        loss = layers.mean(y)
        strategy = fl.DistributedStrategyFactory.create_sync_strategy()
        if a_sync_configs is not None:
            strategy.a_sync_configs = a_sync_configs
        fl.distributed_optimizer(fl.optimizer.SGD(lr), strategy).minimize(loss)
    if fl.is_server():
        fl.init_server()  # a restarted server of a job that takes restarts reloads here
        fl.run_server()
        sys.exit(0)
    exe = fl.Executor(fl.CPUPlace())
    exe.run(fl.startup_program)
    if worker_timeout_s is None:
        fl.init_worker()
    else:
        fl.init_worker(timeout=worker_timeout_s)
    return Worker(exe, loss)
