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
