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

from fleet import _core, model_files
from fleet.base.distributed_optimizer import DistributedOptimizer
from fleet.base.util_base import UtilBase
from fleet.collective import program_pass as collective_pass
from fleet.collective.runtime import CollectiveRuntime
from fleet.distributed_strategy import DistributedStrategy
from fleet.errors import InvalidArgument, Unavailable
from fleet.framework import Program, default_main_program
from fleet.monitoring import ProcessMetrics
from fleet.optimizer import Optimizer
from fleet.ps import program_pass as ps_pass
from fleet.ps.program_pass import PsPlan
from fleet.ps.runtime import PsRuntime
from fleet.role_maker import RoleMakerBase, role_from_environment
from fleet.scope import global_scope


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
        self._metrics: Optional[ProcessMetrics] = None

    def init(self, role_maker: Optional[RoleMakerBase] = None, is_collective: bool = False) -> None:
        """Sets this process's role. Without `role_maker`, reads it from the environment
        (PaddleCloudRoleMaker(is_collective)); without any launcher variable there, the script
        runs as a one-worker job, as in Paddle 2.x, and says so once (role_from_environment).
        Calling init again replaces the role and drops
        the worker group and collective group built for the previous one. Never blocks: the
        workers meet on the first fleet.util call or barrier_worker(), a collective job's ranks
        on its first distributed minimize (or fleet.init_worker())."""
        if role_maker is None:
            role_maker = role_from_environment(is_collective)
        elif not isinstance(role_maker, RoleMakerBase):
            raise InvalidArgument(
                f"fleet.init: role_maker must be a role maker from "
                f"fleet.role_maker, got {type(role_maker).__name__}"
            )
        self.collective_runtime.close()
        self.util.close()
        self._role_maker = role_maker
        self._serve_metrics(role_maker)

    def _serve_metrics(self, role: RoleMakerBase) -> None:
        """With a metrics port (FLEET_METRICS_PORT, read by the role maker), serves this
        process's metrics on its role's address (fleet.monitoring). Once per facade: a later
        init() keeps the exporter (its port is the process's)."""
        if role.metrics_port is None or self._metrics is not None:
            return
        is_server = role.is_server()
        metrics = ProcessMetrics(
            "server" if is_server else "worker",
            role.server_index() if is_server else role.worker_index(),
            self.runtime_resources,
            client=self._ps_core_client,
            server=lambda: self._ps_runtime.server if self._ps_runtime is not None else None,
        )
        try:
            metrics.start(role.gloo.hostname, role.metrics_port)
        except Exception:
            metrics.close()
            raise
        self._metrics = metrics

    def _ps_core_client(self) -> Any:
        """The worker's `_core.ps.Client` from init_worker until stop_worker, else None."""
        runtime = self._ps_runtime
        client = runtime.client if runtime is not None else None
        try:
            return client.core_client if client is not None else None
        except Unavailable:  # closed between the two reads
            return None

    @property
    def role_maker(self) -> RoleMakerBase:
        """The role set by init(); InvalidArgument before init()."""
        if self._role_maker is None:
            raise InvalidArgument("fleet.init() has not been called in this process")
        return self._role_maker

    def is_initialized(self) -> bool:
        return self._role_maker is not None

    def _local(self) -> bool:
        """A one-worker job without servers that is not collective (fleet.init() without a
        launcher): distributed_optimizer trains locally, there is nothing to connect or stop,
        and saves write the scope's values (fleet/model_files.py)."""
        role = self.role_maker
        return (
            not role.is_collective
            and role.is_worker()
            and role.worker_num() == 1
            and role.server_num() == 0
        )

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
        if self._local():
            pass  # one worker, no servers: the programs train as they are
        elif role.is_collective:
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
        if self._metrics is not None:
            self._metrics.count_samples_of(main)

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
        if self._local():
            return
        if self.role_maker.is_collective:
            self._connect_collective()
            return
        self._ps("init_worker").init_worker(scope, timeout, program=self.main_program)

    def flush_worker(self) -> None:
        """Pushes every pending gradient and refreshes the dense parameters (e.g. before
        evaluating in async mode). Nothing to do outside a PS job."""
        if self._local() or self.role_maker.is_collective:
            return
        self._started_ps("fleet.init_worker() has not been called").flush_worker()

    def stop_worker(self, timeout: float = 300.0) -> None:
        """Flushes every pending gradient, waits for every worker, and lets worker 0 stop the
        servers; nothing pushed before this returns is lost. Nothing to do outside a PS job."""
        if self._local() or self.role_maker.is_collective:
            return
        runtime = self._started_ps("fleet.stop_worker(): fleet.init_worker() was not called")
        runtime.stop_worker(timeout)

    # -- saving and restoring a parameter-server job (fleet/ps/persist.py, inference.py) ------
    def _checkpointer(self, what: str) -> Any:
        not_started = f"fleet.{what}(): call fleet.init_worker() first (workers only)"
        return self._started_ps(not_started).checkpointer

    def _program(self, main_program: Any) -> Any:
        return main_program if main_program is not None else self.main_program

    def parameters_on_servers(self) -> bool:
        """Whether this job's parameters live on parameter servers (a PS job after minimize):
        fleet.io's whole-model saves then go to save_persistables / load_model."""
        return self._ps_plan is not None and self.is_initialized() and not self._local()

    def save_persistables(
        self,
        executor: Any,
        dirname: str,
        main_program: Any = None,
        mode: int = 0,
        timeout: float = 600.0,
    ) -> None:
        """Paddle's idiom: `if fleet.is_first_worker(): fleet.save_persistables(exe, dirname)`.
        PS jobs: the first worker saves every server table (with update-rule state) and its
        worker-local persistables into `dirname`, atomically, while the others go on; another
        worker's call flushes its gradients and returns (fleet/ps/persist.py says what a save
        holds). mode 0 base, 1 delta (rows changed since the previous save), 2 values.
        Collective and one-worker jobs: the first worker writes the scope's persistables (one
        file per variable, as fleet.io.save_persistables). A path that is a file is refused on
        every worker, naming it. `timeout` bounds the waits of every-worker calls (load_model);
        a save waits for no other worker. `executor` is accepted for Paddle's signature."""
        program = self._program(main_program)
        if not self.parameters_on_servers():
            self._save_scope_values(dirname, program, "save_persistables")
            return
        self._checkpointer("save_persistables").save_persistables(dirname, program, mode)

    def _save_scope_values(self, dirname: str, program: Any, what: str) -> None:
        dirname = model_files.check_directory(dirname, f"fleet.{what}")
        if not self.is_first_worker():
            return  # every rank holds the same values: the first one writes them
        program = program if program is not None else default_main_program()
        names = [v.name for v in program.list_vars() if model_files.saveable(v)]
        arrays = model_files.values_of(global_scope(), names, f"fleet.{what}")
        model_files.save_arrays(dirname, arrays, None)

    def load_model(self, dirname: str, mode: int = 0, timeout: float = 600.0) -> None:
        """Every worker calls it, after init_worker(). mode 0: the servers load every table
        from `dirname` (base and deltas, any server count) and each worker its local
        persistables; mode 1: the worker-local persistables only (servers restored by
        fleet.init_server(dirname)). `timeout` bounds the workers' meetings before and after.
        Collective and one-worker jobs: the scope's persistables from what save_persistables
        wrote."""
        program = self._program(None)
        if not self.parameters_on_servers():
            program = program if program is not None else default_main_program()
            names = [v.name for v in program.list_vars() if model_files.saveable(v)]
            arrays = model_files.load_arrays(dirname, names, None)
            model_files.set_values(global_scope(), arrays, str(dirname))
            return
        self._checkpointer("load_model").load_model(dirname, program, mode, timeout)

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
        timeout: float = 600.0,
    ) -> None:
        """The first worker writes the forward program pruned to `target_vars` and the values it
        reads into `dirname` (in a PS job every sparse table's rows too, values only: see
        fleet/ps/inference.py), for fleet.load_inference_model to serve without servers; another
        worker's call flushes its gradients and returns. A path that is a file is refused on
        every worker, naming it. `timeout` as for save_persistables."""
        if not export_for_deployment:
            raise InvalidArgument(
                "save_inference_model: export_for_deployment=False (a "
                "program that still pulls from servers) is not supported"
            )
        if isinstance(feeded_var_names, str):
            feeded_var_names = [feeded_var_names]
        if not isinstance(target_vars, (list, tuple)):
            target_vars = [target_vars]
        targets = [getattr(v, "name", v) for v in target_vars]
        program = self._program(main_program)
        if not self.parameters_on_servers():
            dirname = model_files.check_directory(dirname, "fleet.save_inference_model")
            if self.is_first_worker():
                program = program if program is not None else default_main_program()
                model_files.export_scope_model(
                    dirname, program, list(feeded_var_names), targets, global_scope()
                )
            return
        self._checkpointer("save_inference_model").save_inference_model(
            dirname, list(feeded_var_names), targets, program
        )
