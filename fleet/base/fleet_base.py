"""The Fleet facade: `fleet.init(role)` and the topology queries every Fleet script starts with.

One Fleet object per process is the facade's whole point (fleet.fleet_api holds it); everything
beneath it (groups, stores, servers, clients) is an object its owner creates and passes on. The
facade runs the program pass of the job's kind and builds the engine from the role, the pass's
plan and the runtime resources: the PS runtime (fleet/ps/runtime.py) or the collective runtime
(fleet/collective/runtime.py).

Internal: scripts use the process's Fleet through the fleet module (fleet.init, fleet.util,
...); only tests build Fleet objects of their own.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from fleet import _core
from fleet.base.distributed_optimizer import DistributedOptimizer
from fleet.base.util_base import UtilBase
from fleet.collective import program_pass as collective_pass
from fleet.collective.runtime import CollectiveRuntime
from fleet.distributed_strategy import DistributedStrategy
from fleet.errors import InvalidArgument
from fleet.framework import Program
from fleet.optimizer import Optimizer
from fleet.ps import program_pass as ps_pass
from fleet.ps.program_pass import PsPlan
from fleet.ps.runtime import PsRuntime
from fleet.role_maker import PaddleCloudRoleMaker, RoleMakerBase


class Fleet:
    """Who this process is in the job, and the worker utilities (`util`)."""

    def __init__(self, resources: Any = None) -> None:
        """`resources`: the `_core.RuntimeResources` the engines attach to (the PS communicator
        after init_worker(), the collective group); the process's facade passes the one every
        fleet.Executor sees by default (fleet.scope.default_resources()), another Fleet object
        (in tests) gets an empty one of its own."""
        self._role_maker: Optional[RoleMakerBase] = None
        self.util = UtilBase(lambda: self.role_maker)
        self.runtime_resources = resources if resources is not None else _core.RuntimeResources()
        self.collective_runtime = CollectiveRuntime()
        # Set by distributed_optimizer(...).minimize (the 1.x API's fleet.main_program).
        self.main_program: Any = None
        self.startup_program: Any = None
        self._ps_plan: Optional[PsPlan] = None
        self._ps_runtime: Optional[PsRuntime] = None

    def init(self, role_maker: Optional[RoleMakerBase] = None, is_collective: bool = False) -> None:
        """Sets this process's role. Without `role_maker`, reads it from the environment
        (PaddleCloudRoleMaker(is_collective)). Calling init again replaces the role and drops
        the worker group and collective group built for the previous one. Never blocks: the
        workers meet on the first fleet.util call or barrier_worker(), a collective job's ranks
        on its first distributed minimize (or fleet.init_worker())."""
        if role_maker is None:
            role_maker = PaddleCloudRoleMaker(is_collective=is_collective)
        elif not isinstance(role_maker, RoleMakerBase):
            raise InvalidArgument(
                f"fleet.init: role_maker must be a role maker from "
                f"fleet.role_maker, got {type(role_maker).__name__}"
            )
        self.collective_runtime.close()
        self.util.close()
        self._role_maker = role_maker

    @property
    def role_maker(self) -> RoleMakerBase:
        """The role set by init(); InvalidArgument before init()."""
        if self._role_maker is None:
            raise InvalidArgument("fleet.init() has not been called in this process")
        return self._role_maker

    def is_initialized(self) -> bool:
        return self._role_maker is not None

    def is_collective(self) -> bool:
        return self.role_maker.is_collective

    def is_server(self) -> bool:
        return self.role_maker.is_server()

    def is_worker(self) -> bool:
        return self.role_maker.is_worker()

    def is_first_worker(self) -> bool:
        return self.role_maker.is_first_worker()

    def worker_index(self) -> int:
        return self.role_maker.worker_index()

    def worker_num(self) -> int:
        return self.role_maker.worker_num()

    def server_index(self) -> int:
        return self.role_maker.server_index()

    def server_num(self) -> int:
        return self.role_maker.server_num()

    def server_endpoints(self, to_string: bool = False) -> list[str] | str:
        endpoints = self.role_maker.server_endpoints()
        return ",".join(endpoints) if to_string else endpoints

    def worker_endpoints(self, to_string: bool = False) -> list[str] | str:
        endpoints = self.role_maker.worker_endpoints()
        return ",".join(endpoints) if to_string else endpoints

    def restart_checkpoint(self) -> Optional[str]:
        """The checkpoint a job restarted by fleetrun --max_restarts should resume from (pass
        it to init_server), or None (a first start, or no complete save yet)."""
        return getattr(self.role_maker, "restart_checkpoint", None)

    def barrier_worker(self) -> None:
        """Returns once every worker has called barrier_worker(); workers only."""
        self.util.barrier()

    @property
    def ps_plan(self) -> Optional[PsPlan]:
        """The tables the PS program pass decided (None before a PS job's minimize)."""
        return self._ps_plan

    # -- distributed training ------------------------------------------------------------------
    def distributed_optimizer(self, optimizer: Any, strategy: Any = None) -> Any:
        """Wraps `optimizer` so that minimize() also rewrites the programs for this job (PS or
        collective, by the role); see fleet.base.distributed_optimizer."""
        self.role_maker  # noqa: B018 (raises before init())
        return DistributedOptimizer(self, optimizer, strategy)

    def rewrite_for_job(
        self,
        main: Program,
        startup: Program,
        optimizer: Optimizer,
        params_grads: Sequence[tuple[Any, Any]],
        strategy: DistributedStrategy,
    ) -> None:
        """Runs the program pass of this job's kind on `main` and `startup` (in place, after
        the user's optimizer appended backward and update ops) and keeps what the engine needs:
        a collective job connects its group (a rendezvous of all ranks, on the first call) and
        registers the step hooks of the plan; a PS job keeps the plan for init_server /
        init_worker. The programs become fleet.main_program / fleet.startup_program."""
        role = self.role_maker
        if role.is_collective:
            self._connect_collective()
            plan = collective_pass.rewrite(
                main, startup, optimizer, params_grads, strategy, nranks=role.worker_num()
            )
            if plan.gradient_merge is not None:
                self.collective_runtime.add_gradient_merge(plan.gradient_merge)
        else:
            self._ps_plan = ps_pass.rewrite(main, startup, optimizer, list(params_grads), strategy)
            if self._ps_runtime is not None and not self._ps_runtime.started():
                self._ps_runtime = None  # built again from the new plan when needed
        self.main_program, self.startup_program = main, startup

    def _connect_collective(self) -> Any:
        return self.collective_runtime.ensure_group(
            self.role_maker, self.runtime_resources, lambda: self.util.worker_group().store
        )

    def _ps(self, what: str) -> PsRuntime:
        """The PS runtime of this role and plan, built on first need."""
        if self._ps_runtime is None:
            if self._ps_plan is None:
                raise InvalidArgument(
                    f"fleet.{what}(): call fleet.distributed_optimizer(optimizer, "
                    "strategy).minimize(loss) first: it decides the tables"
                )
            self._ps_runtime = PsRuntime(self.role_maker, self._ps_plan, self.runtime_resources)
        return self._ps_runtime

    def _started_ps(self, not_started: str) -> PsRuntime:
        """The PS runtime that init_server / init_worker built; InvalidArgument `not_started`
        before."""
        if self._ps_runtime is None:
            raise InvalidArgument(not_started)
        return self._ps_runtime

    def init_server(self, model_dir: Optional[str] = None) -> None:
        """Builds this server's tables from the rewritten program (servers only)."""
        self._ps("init_server").init_server(model_dir)

    def run_server(self) -> None:
        """Serves until the workers' stop_worker() (or SIGTERM) stops this server."""
        self._started_ps("fleet.run_server(): call fleet.init_server() first").run_server()

    def init_worker(self, scope: Any = None, timeout: float = 300.0) -> None:
        """PS jobs: connects to the servers, sets their dense values once from worker 0's
        start-up values, gives every worker those values, and starts the communicator that every
        fleet.Executor then uses (its kernels and step hooks). Run the startup program first.
        Collective jobs: connects the collective group (a rendezvous of all ranks) unless a
        distributed minimize already did."""
        if self.role_maker.is_collective:
            self._connect_collective()
            return
        self._ps("init_worker").init_worker(scope, timeout)

    def flush_worker(self) -> None:
        """Pushes every pending gradient and refreshes the dense parameters (e.g. before
        evaluating in async mode)."""
        self._started_ps("fleet.init_worker() has not been called").flush_worker()

    def stop_worker(self, timeout: float = 300.0) -> None:
        """Flushes every pending gradient, waits for every worker, and lets worker 0 stop the
        servers; nothing pushed before this returns is lost."""
        runtime = self._started_ps("fleet.stop_worker(): fleet.init_worker() was not called")
        runtime.stop_worker(timeout)

    # -- saving and restoring a parameter-server job (fleet/ps/persist.py, inference.py) ------
    def _checkpointer(self, what: str) -> Any:
        not_started = f"fleet.{what}(): call fleet.init_worker() first (workers only)"
        return self._started_ps(not_started).checkpointer

    def _program(self, main_program: Any) -> Any:
        return main_program if main_program is not None else self.main_program

    def save_persistables(
        self, executor: Any, dirname: str, main_program: Any = None, mode: int = 0
    ) -> None:
        """Every worker calls it; worker 0 saves every server table (with update-rule state)
        and its worker-local persistables into `dirname`, atomically; the others return when it
        is done. mode 0 base, 1 delta (rows changed since the previous save), 2 values (a base
        save: see fleet/ps/persist.py). `executor` is accepted for Paddle's signature."""
        self._checkpointer("save_persistables").save_persistables(
            dirname, self._program(main_program), mode
        )

    def load_model(self, dirname: str, mode: int = 0) -> None:
        """Every worker calls it, after init_worker(). mode 0: the servers load every table
        from `dirname` (base and deltas, any server count) and each worker its local
        persistables; mode 1: the worker-local persistables only (servers restored by
        fleet.init_server(dirname))."""
        self._checkpointer("load_model").load_model(dirname, self._program(None), mode)

    def shrink(self, threshold: int) -> int:
        """Every worker calls it: drops the sparse rows not created or updated in the last
        `threshold` saves (see fleet/ps/persist.py); worker 0 returns how many."""
        return self._checkpointer("shrink").shrink(threshold)

    def save_inference_model(
        self,
        executor: Any,
        dirname: str,
        feeded_var_names: list,
        target_vars: list,
        main_program: Any = None,
        export_for_deployment: bool = True,
    ) -> None:
        """Every worker calls it; worker 0 writes the forward program pruned to `target_vars`,
        its dense parameters and every sparse table's rows (values only) into `dirname`, for
        fleet.load_inference_model to serve without servers (see fleet/ps/inference.py)."""
        if not export_for_deployment:
            raise InvalidArgument(
                "save_inference_model: export_for_deployment=False (a "
                "program that still pulls from servers) is not supported"
            )
        targets = [getattr(v, "name", v) for v in target_vars]
        self._checkpointer("save_inference_model").save_inference_model(
            dirname, list(feeded_var_names), targets, self._program(main_program)
        )
