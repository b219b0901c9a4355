"""The parameter-server runtime behind the fleet facade: init_server / run_server on a server,
init_worker / stop_worker on a worker. The facade builds it from this process's role, the plan
the PS program pass returned and the runtime resources the executors see.

Lifecycle of a job launched by ``fleetrun --server_num=S --worker_num=W``::

    fleet.init()                                  # role from the environment
    opt = fleet.distributed_optimizer(optimizer, strategy)
    opt.minimize(loss)                            # rewrites the programs, records the tables
    if fleet.is_server():
        fleet.init_server(); fleet.run_server()   # serves until the workers stop it
    else:
        exe.run(fleet.startup_program)
        fleet.init_worker()                       # connect, same start values everywhere
        # (init_worker() may come first, as in Paddle 1.x's documents: it connects at once and
        # hands the start-up values over right after the startup program has run)
        ... exe.run(...) / exe.train_from_dataset(...)
        fleet.stop_worker()                       # flush, wait for all, stop the servers

Internal: the facade (fleet/base/fleet_base.py) builds and calls it; scripts use
fleet.init_server(), fleet.init_worker() and the other fleet functions.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from google.protobuf import text_format

from fleet import _core
from fleet.distributed_strategy import PsMode
from fleet.errors import InvalidArgument, NotFound
from fleet.ps.checkpoint import read_manifest
from fleet.ps.client import PsClient
from fleet.ps.config import server_config
from fleet.ps.persist import Checkpointer, meet
from fleet.ps.program_pass import PsPlan
from fleet.ps.serving import serve_until_stopped, start_server, tune_allocator
from fleet.role_maker import RoleMakerBase
from fleet.scope import add_run_listener, global_scope, remove_run_listener

logger = logging.getLogger("fleet.ps")


def check_pulled_ids(plan: PsPlan, program: Any) -> None:
    """Refuses a program whose pull_sparse ops read other id variables than the plan names
    (SparseTablePlan.id_vars): the async prefetch gathers each table's ids from those names, so
    a variable renamed or lookups fused differently after minimize() would leave it unused
    without a word. InvalidArgument naming the table and both lists."""
    ops = program.global_block().ops
    for table in plan.sparse:
        pulled = [
            name
            for op in ops
            if op.type == "pull_sparse" and int(op.attrs["table_id"]) == table.table_id
            for name in op.input("Ids")
        ]
        if pulled != table.id_vars:
            raise InvalidArgument(
                f"fleet.init_worker(): sparse table {table.table_id} ('{table.param}') was planned "
                f"to pull the ids of {table.id_vars}, but the program's pull_sparse ops read "
                f"{pulled}: the program changed after minimize() (a renamed id variable or "
                "lookups fused differently), so the async prefetch would miss every batch; "
                "call minimize() on the final program"
            )


def _holds_a_save(dirname: str) -> bool:
    """Whether a save into the checkpoint `dirname` completed (its manifest is written last)."""
    try:
        read_manifest(dirname)
    except NotFound:
        return False
    return True


class PsRuntime:
    """One per process (held by the fleet facade). `resources`: the `_core.RuntimeResources`
    the executors see, to which init_worker attaches the communicator."""

    def __init__(self, role: RoleMakerBase, plan: PsPlan, resources: Any) -> None:
        self._role = role
        self._plan = plan
        self._resources = resources
        self._server: Optional[Any] = None
        self.client: Optional[PsClient] = None
        self.communicator: Optional[Any] = None
        # init_worker() before the startup program: the communicator built, not yet started
        # (its start hands over the dense values, which the startup program creates).
        self._waiting: Optional[tuple[Any, Any]] = None  # (communicator, root scope)
        self._stopped = False
        self.checkpointer = Checkpointer(role, plan, self.worker_connection)

    def started(self) -> bool:
        """Whether init_server or init_worker built a server or a communicator."""
        return (
            self._server is not None or self.communicator is not None or self._waiting is not None
        )

    @property
    def server(self) -> Optional[Any]:
        """The `_core.ps.Server` init_server started, until run_server returns; else None."""
        return self._server

    def worker_connection(self, what: str) -> tuple[PsClient, Any]:
        """(client, communicator) of the started worker; InvalidArgument naming `what`, the API
        called, and why there is none: before init_worker(), before the startup program ran
        after it, after stop_worker(), on a server."""
        self._start_when_ready()
        if self.communicator is None or self.client is None:
            if not self._role.is_worker():
                raise InvalidArgument(
                    f"fleet.{what}() is for workers (this process is server "
                    f"{self._role.server_index()})"
                )
            if self._stopped:
                raise InvalidArgument(
                    f"fleet.{what}(): the parameter servers of this job were stopped by "
                    "stop_worker(); save before it"
                )
            if self._waiting is not None:
                raise InvalidArgument(
                    f"fleet.{what}(): this worker has not run the startup program since "
                    "fleet.init_worker(); run it first (exe.run(fleet.startup_program))"
                )
            raise InvalidArgument(f"fleet.{what}(): call fleet.init_worker() first (workers only)")
        return self.client, self.communicator

    # -- server ------------------------------------------------------------------------------
    def init_server(self, model_dir: Optional[str] = None) -> None:
        role = self._role
        if not role.is_server():
            raise InvalidArgument(
                "fleet.init_server() is for server processes "
                f"(this one is {role.role.name.lower()})"
            )
        plan = self._plan
        index, endpoints = role.server_index(), role.server_endpoints()
        config = server_config(index, len(endpoints), plan.table_configs())
        address = endpoints[index]
        restart = getattr(role, "restart_checkpoint", None)
        if model_dir is None and plan.strategy.async_config.server_restarts and restart:
            # A job that takes restarted servers: this server was started again (by fleetrun
            # or a cluster manager) with the job's latest checkpoint, which it reloads before
            # its port opens; the workers go on with it once they see that it did. A cluster
            # manager restarts a pod with the environment of its first start, so the variable
            # may name a checkpoint no save has completed into yet: the job's first start.
            if _holds_a_save(restart):
                logger.warning(
                    "server %d: restarted under the job; reloading its tables from %s",
                    index,
                    restart,
                )
                model_dir = restart
            else:
                logger.info("server %d: %s holds no complete save: starting empty", index, restart)
        # Every pull and push builds megabyte buffers: keep freed ones for reuse instead of
        # faulting fresh pages in per request, and cap malloc arenas for a table on SSD
        # (serving_allocator.h).
        tune_allocator(config)
        # With model_dir each server loads its share of every table before its port opens:
        # a worker's first pull waits for the load (init_worker's connect timeout bounds it),
        # and worker 0's start-up dense values are refused by the loaded (no longer pristine)
        # dense table.
        self._server = start_server(
            config,
            address,
            load_dirname=model_dir,
            job_id=role.job_id,
            worker_restarts=plan.strategy.async_config.worker_restarts,
            local_transport=plan.strategy.async_config.local_transport == "unix",
        )
        if model_dir is not None:
            logger.info("server %d: tables restored from %s", index, model_dir)
        for line in self._server.describe().splitlines():
            logger.info("%s", line)

    def run_server(self) -> None:
        if self._server is None:
            raise InvalidArgument("fleet.run_server(): call fleet.init_server() first")
        try:
            serve_until_stopped(self._server)
        finally:
            self._server = None

    # -- worker ------------------------------------------------------------------------------
    def init_worker(self, scope: Any = None, timeout: float = 300.0, program: Any = None) -> None:
        """Connects, builds the communicator from the plan and starts it (once the dense
        parameters exist). `program`, the rewritten main program, is checked against the plan
        where the communicator relies on its variable names (the async prefetch)."""
        role = self._role
        if not role.is_worker():
            raise InvalidArgument("fleet.init_worker() is for worker processes")
        if self.communicator is not None or self._waiting is not None:
            raise InvalidArgument("fleet.init_worker() was called already")
        plan = self._plan
        cfg = plan.strategy.async_config
        if (
            program is not None
            and plan.mode is PsMode.ASYNC
            and cfg.prefetch_sparse
            and cfg.max_sparse_staleness < 0
        ):
            check_pulled_ids(plan, program)
        # A worker's communicator builds megabyte buffers every step too (the same tuning).
        _core.ps.tune_allocator_for_serving()
        self.client = PsClient(
            role.server_endpoints(),
            connect_timeout=timeout,
            rpc_timeout=cfg.rpc_timeout_s,
            job_id=role.job_id,
            server_restarts=cfg.server_restarts,
            local_host=role.gloo.hostname if cfg.local_transport != "off" else "",
            local_socket=cfg.local_transport == "unix",
            local_shared_memory=cfg.local_transport == "shm",
        )
        _check_update_rules(plan, self.client)
        dense_id = plan.dense_config.table_id if plan.dense_config is not None else None
        root = scope if scope is not None else global_scope()
        config = _core.distributed.CommunicatorConfig()
        config.mode = getattr(_core.distributed.PsMode, plan.mode.name)
        config.worker_id = role.worker_index()
        config.num_workers = role.worker_num()
        config.dense_table_id = dense_id
        config.dense = [
            _core.distributed.DenseVar(d.param, d.grad, d.offset, d.numel) for d in plan.dense
        ]
        config.sparse = [
            _core.distributed.SparseVar(
                s.table_id, s.dim, s.param, s.id_vars, s.config.optimizer.SerializeToString()
            )
            for s in plan.sparse
        ]
        config.send_queue_size = cfg.send_queue_size
        config.max_merge_var_num = cfg.max_merge_var_num
        config.send_wait_times = cfg.send_wait_times
        config.thread_pool_size = cfg.thread_pool_size
        config.independent_recv = cfg.independent_recv_thread
        config.max_dense_staleness = cfg.max_dense_staleness
        config.prefetch_sparse = cfg.prefetch_sparse
        config.max_sparse_staleness = cfg.max_sparse_staleness
        config.geo_steps = max(cfg.k_steps, 1)
        config.step_timeout_s = timeout
        communicator = _core.distributed.Communicator(config, self.client.core_client, root)
        self._waiting = (communicator, root)
        if self._dense_missing(root):
            # Paddle 1.x's order (init_worker, then the startup program): start once it ran.
            add_run_listener(self._start_when_ready)
            logger.info(
                "worker %d: connected; the dense start-up values are handed over once the "
                "startup program has run",
                role.worker_index(),
            )
            return
        self._start_when_ready()

    def _dense_missing(self, root: Any) -> list[str]:
        """The dense parameters without a value in `root` (the startup program makes them)."""
        missing = []
        for dense in self._plan.dense:
            var = root.find_var(dense.param)
            if var is None or not var.is_initialized():
                missing.append(dense.param)
        return missing

    def _start_when_ready(self) -> None:
        """Starts the communicator init_worker built once the dense parameters exist: worker 0's
        values go to the servers, every worker pulls them, the mode's threads start. Run by
        init_worker, or by the executor around each run (fleet.scope's run listeners)."""
        if self._waiting is None:
            return
        communicator, root = self._waiting
        if self._dense_missing(root):
            return
        self._waiting = None
        remove_run_listener(self._start_when_ready)
        communicator.attach(self._resources)
        try:
            communicator.start()
        except Exception:
            communicator.detach(self._resources)
            raise
        self.communicator = communicator
        logger.info(
            "worker %d: %s communicator started", self._role.worker_index(), self._plan.mode.value
        )

    def flush_worker(self) -> None:
        """Pushes every pending gradient and refreshes the dense parameters."""
        _, communicator = self.worker_connection("flush_worker")
        communicator.flush()

    def stop_worker(self, timeout: float = 300.0) -> None:
        self._start_when_ready()
        if self.communicator is None:
            if self._stopped:
                raise InvalidArgument("fleet.stop_worker() was called already")
            if self._waiting is not None:
                self._waiting = None
                remove_run_listener(self._start_when_ready)
                raise InvalidArgument(
                    "fleet.stop_worker(): this worker has not run the startup program since "
                    "fleet.init_worker(), so it never joined the job"
                )
            raise InvalidArgument("fleet.stop_worker(): fleet.init_worker() was not called")
        role = self._role
        self._stopped = True
        try:
            self.communicator.stop()
        finally:
            self.communicator.detach(self._resources)
            self.communicator = None
        assert self.client is not None
        meet(
            self.client,
            "__stop_worker__",
            role.worker_num(),
            role.worker_index(),
            timeout,
            "fleet.stop_worker()",
        )
        if role.worker_index() == 0:
            self.client.stop_servers()
        self.client = None


def _check_update_rules(plan: PsPlan, client: PsClient) -> None:
    """Refuses (InvalidArgument naming the table and both rules) a table whose update rule in
    this worker's plan differs from the servers': a worker's Adam against the servers' SGD, or in
    GEO a worker's local rule against the others' (every worker is compared with the servers,
    which hold the rule of the servers' plan). Like a differing dimension, it would train with
    a rule nobody asked for, without an error."""
    for table in plan.table_configs():
        theirs = client.table_config(table.table_id).optimizer
        if theirs.SerializeToString(deterministic=True) == table.optimizer.SerializeToString(
            deterministic=True
        ):
            continue
        raise InvalidArgument(
            f"fleet.init_worker(): table {table.table_id} ('{table.name}') is updated with "
            f"{_rule(theirs)} on the servers but with {_rule(table.optimizer)} in this worker's "
            "program: every role must build the same optimizer (and strategy table_optimizers)"
        )


def _rule(optimizer: Any) -> str:
    return "{" + text_format.MessageToString(optimizer, as_one_line=True) + "}"


__all__ = ["PsRuntime"]
