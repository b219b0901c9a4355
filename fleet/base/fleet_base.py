"""The Fleet facade: `fleet.init(role)` and the topology queries every Fleet script starts with.

One Fleet object per process is the facade's whole point (fleet.fleet_api holds it); everything
beneath it (groups, stores, servers, clients) is an object its owner creates and passes on.
"""

from __future__ import annotations

from typing import Any, Optional

from fleet import _core
from fleet.base.util_base import UtilBase
from fleet.collective.runtime import CollectiveRuntime
from fleet.errors import InvalidArgument
from fleet.role_maker import PaddleCloudRoleMaker, RoleMakerBase


class Fleet:
    """Who this process is in the job, and the worker utilities (`util`)."""

    def __init__(self) -> None:
        self._role_maker: Optional[RoleMakerBase] = None
        self.util = UtilBase(lambda: self.role_maker)
        # The distributed resources every fleet.Executor's kernels see by default (the PS
        # communicator after init_worker(), the collective group); empty until then.
        self.runtime_resources = _core.RuntimeResources()
        self.collective_runtime = CollectiveRuntime()
        # Set by distributed_optimizer(...).minimize (the 1.x API's fleet.main_program).
        self.main_program: Any = None
        self.startup_program: Any = None
        self._ps_plan: Any = None
        self._ps_runtime: Any = None

    def init(self, role_maker: Optional[RoleMakerBase] = None, is_collective: bool = False) -> None:
        """Sets this process's role. Without `role_maker`, reads it from the environment
        (PaddleCloudRoleMaker(is_collective)). Calling init again replaces the role and drops
        the worker group built for the previous one. Never blocks: the workers meet on the first
        fleet.util call or barrier_worker()."""
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

    # -- distributed training ------------------------------------------------------------------
    def distributed_optimizer(self, optimizer: Any, strategy: Any = None) -> Any:
        """Wraps `optimizer` so that minimize() also rewrites the programs for this job (PS or
        collective, by the role); see fleet.base.distributed_optimizer."""
        from fleet.base.distributed_optimizer import DistributedOptimizer

        self.role_maker  # noqa: B018 (raises before init())
        return DistributedOptimizer(self, optimizer, strategy)

    def _ps(self) -> Any:
        if self._ps_runtime is None:
            from fleet.ps.runtime import PsRuntime

            self._ps_runtime = PsRuntime(self)
        return self._ps_runtime

    def init_server(self, model_dir: Optional[str] = None) -> None:
        """Builds this server's tables from the rewritten program (servers only)."""
        self._ps().init_server(model_dir)

    def run_server(self) -> None:
        """Serves until the workers' stop_worker() (or SIGTERM) stops this server."""
        self._ps().run_server()

    def init_worker(self, scope: Any = None, timeout: float = 300.0) -> None:
        """Connects to the servers, sets their dense values once from worker 0's start-up values,
        gives every worker those values, and starts the communicator that every fleet.Executor
        then uses (its kernels and step hooks). Run the startup program first."""
        self._ps().init_worker(scope, timeout)

    def flush_worker(self) -> None:
        """Pushes every pending gradient and refreshes the dense parameters (e.g. before
        evaluating in async mode)."""
        self._ps().flush_worker()

    def stop_worker(self, timeout: float = 300.0) -> None:
        """Flushes every pending gradient, waits for every worker, and lets worker 0 stop the
        servers; nothing pushed before this returns is lost."""
        self._ps().stop_worker(timeout)

    # -- saving and restoring a parameter-server job (fleet/ps/persist.py, inference.py) ------
    def save_persistables(
        self, executor: Any, dirname: str, main_program: Any = None, mode: int = 0
    ) -> None:
        """Every worker calls it; worker 0 saves every server table (with update-rule state)
        and its worker-local persistables into `dirname`, atomically; the others return when it
        is done. mode 0 base, 1 delta (rows changed since the previous save), 2 values (a base
        save: see fleet/ps/persist.py)."""
        self._ps().checkpointer.save_persistables(executor, dirname, main_program, mode)

    def load_model(self, dirname: str, mode: int = 0) -> None:
        """Every worker calls it, after init_worker(). mode 0: the servers load every table
        from `dirname` (base and deltas, any server count) and each worker its local
        persistables; mode 1: the worker-local persistables only (servers restored by
        fleet.init_server(dirname))."""
        self._ps().checkpointer.load_model(dirname, mode)

    def shrink(self, threshold: int) -> int:
        """Every worker calls it: drops the sparse rows not created or updated in the last
        `threshold` saves (see fleet/ps/persist.py); worker 0 returns how many."""
        return self._ps().checkpointer.shrink(threshold)

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
        from fleet.ps import inference
        from fleet.ps.persist import _runtime

        if not export_for_deployment:
            raise InvalidArgument(
                "save_inference_model: export_for_deployment=False (a "
                "program that still pulls from servers) is not supported"
            )
        runtime = _runtime(self, "save_inference_model")
        program = main_program if main_program is not None else self.main_program
        targets = [getattr(v, "name", v) for v in target_vars]
        role = self.role_maker
        n = next(runtime.checkpointer._calls)
        runtime.communicator.flush()
        runtime.client.barrier(f"__export_begin_{n}__", role.worker_num(), role.worker_index())
        try:
            if role.worker_index() == 0:
                inference.export(self, runtime, dirname, list(feeded_var_names), targets, program)
        finally:
            runtime.client.barrier(
                f"__export_end_{n}__", role.worker_num(), role.worker_index(), 600.0
            )
