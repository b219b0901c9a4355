"""`fleet.distributed_optimizer(optimizer, strategy)`: a thin dispatcher to the program passes of
the job's kind. Its `minimize(loss)` first lets the user's optimizer append backward and update
ops as in one process, then rewrites the main and startup programs in place:

* parameter-server jobs (`fleet.init()` with a PS role): `fleet.ps.program_pass`;
* collective jobs (`fleet.init(is_collective=True)`): `fleet.collective.program_pass`.

The facade (`Fleet.rewrite_for_job`) picks the pass and keeps its plan. The rewritten programs
are also `fleet.main_program` / `fleet.startup_program` (the 1.x API).

Internal: scripts get one from fleet.distributed_optimizer(optimizer, strategy).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from fleet.distributed_strategy import DistributedStrategy
from fleet.errors import InvalidArgument
from fleet.framework import Program, Variable, default_startup_program
from fleet.optimizer import Optimizer, apply_per_parameter


class DistributedOptimizer:
    """`fleet`: the facade (a fleet.base.fleet_base.Fleet) whose job the programs are for."""

    def __init__(
        self, fleet: Any, optimizer: Optimizer, strategy: DistributedStrategy | None
    ) -> None:
        if not isinstance(optimizer, Optimizer):
            raise InvalidArgument(
                f"distributed_optimizer: optimizer must be a fleet.optimizer "
                f"optimizer, got {type(optimizer).__name__}"
            )
        if strategy is None:
            strategy = DistributedStrategy()
        if not isinstance(strategy, DistributedStrategy):
            raise InvalidArgument(
                f"distributed_optimizer: strategy must be a "
                f"fleet.DistributedStrategy (or from "
                f"DistributedStrategyFactory), got {type(strategy).__name__}"
            )
        self._fleet = fleet
        self.user_optimizer = optimizer
        self.strategy = strategy

    def minimize(
        self,
        loss: Variable,
        startup_program: Program | None = None,
        parameter_list: Sequence[Any] | None = None,
        no_grad_set: Iterable[Any] | None = None,
    ) -> tuple[list, list]:
        """Appends backward and optimizer ops, then rewrites the programs for the job; returns
        (optimize_ops, params_grads) as Optimizer.minimize does."""
        main = loss.block.program
        startup = startup_program or default_startup_program()
        params_grads = self.user_optimizer.backward(loss, startup, parameter_list, no_grad_set)
        own = _table_optimizers(self.strategy, params_grads)
        optimize_ops = apply_per_parameter(self.user_optimizer, params_grads, own, startup)
        self._fleet.rewrite_for_job(main, startup, self.user_optimizer, params_grads, self.strategy)
        return optimize_ops, params_grads


def _table_optimizers(strategy: DistributedStrategy, params_grads: list) -> dict[str, Optimizer]:
    """strategy.table_optimizers, checked against the parameters that have gradients."""
    own = strategy.table_optimizers
    trained = {param.name for param, _ in params_grads}
    unknown = sorted(set(own) - trained)
    if unknown:
        raise InvalidArgument(
            f"DistributedStrategy.table_optimizers names {unknown}, which the loss has no "
            f"gradient for; trained parameters: {', '.join(sorted(trained))}"
        )
    return own


__all__ = ["DistributedOptimizer"]
