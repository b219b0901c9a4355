"""fluid.DistributeTranspiler as a thin layer over Fleet's program passes and PS runtime.

`transpile()` runs the same parameter-server pass `fleet.distributed_optimizer(...).minimize`
runs (`fleet.ps.program_pass.rewrite`, on a program the user's optimizer already minimized: the
optimizer is read back from its update ops), so both give the same plan; the config only
changes where the dense parameters live on the servers. The trainer program is the rewritten
main program: get_trainer_program() connects to the servers, the communicator starts once the
startup program has run (fleet.ps.runtime waits for it) and stops when the process exits, which
also stops the servers once every trainer has stopped. `exe.run(pserver_program)` builds that
server's tables and serves, returning when the job stops, as Paddle's listen_and_serv op does.
With mode "nccl2" or "collective" the program gets the collective pass (gradients averaged
across the trainers' processes) and the ranks connect their Gloo group before the first run.
"""

from __future__ import annotations

import atexit
import os
from typing import Any, Sequence

from fleet import _core
from fleet import optimizer as optimizers
from fleet._endpoints import parse_endpoint, parse_endpoint_list
from fleet.collective import program_pass as collective_pass
from fleet.collective.runtime import CollectiveRuntime
from fleet.distributed_strategy import DistributedStrategy, DistributedStrategyFactory
from fleet.errors import InvalidArgument
from fleet.framework import (
    OP_ROLE_ATTR,
    OP_ROLE_OPTIMIZE,
    Program,
    default_main_program,
    default_startup_program,
)
from fleet.ps import program_pass as ps_pass
from fleet.ps.runtime import PsRuntime
from fleet.role_maker import GlooConfig, Role, UserDefinedRoleMaker
from fleet.scope import (
    add_run_listener,
    default_resources,
    global_scope,
    remove_run_listener,
)
from fleet.transpiler.config import DistributeTranspilerConfig

_RULES = {"sgd": optimizers.SGD, "adam": optimizers.Adam, "adagrad": optimizers.Adagrad}


class DistributeTranspiler:
    def __init__(self, config: DistributeTranspilerConfig | None = None) -> None:
        if config is not None and not isinstance(config, DistributeTranspilerConfig):
            raise InvalidArgument(
                "DistributeTranspiler: config must be a DistributeTranspilerConfig, got "
                f"{type(config).__name__}"
            )
        self.config = config or DistributeTranspilerConfig()
        self._main: Program | None = None
        self._plan: ps_pass.PsPlan | None = None
        self._endpoints: list[str] = []
        self._trainers = 0
        self._trainer_id = 0
        self._worker: PsRuntime | None = None
        self._trainer_endpoints: list[str] = []
        self._collective = CollectiveRuntime()
        self._store_server: Any = None

    # -- transpile ---------------------------------------------------------------------------
    def transpile(
        self,
        trainer_id: int,
        program: Program | None = None,
        pservers: str | Sequence[str] = "127.0.0.1:6174",
        trainers: int | str = 1,
        sync_mode: bool = True,
        startup_program: Program | None = None,
        current_endpoint: str = "127.0.0.1:6174",
    ) -> None:
        """Rewrites `program` (default: the default main program, already minimized) and
        `startup_program` in place for trainer `trainer_id` of `trainers` and the servers
        `pservers` ("ip:port,ip:port")."""
        cfg = self.config
        cfg.check()
        main = program if program is not None else default_main_program()
        startup = startup_program if startup_program is not None else default_startup_program()
        if cfg.mode == "pserver":
            count = _trainer_count(trainers)
            endpoints = (
                parse_endpoint_list(pservers, "transpile: pservers")
                if isinstance(pservers, str)
                else parse_endpoint_list(",".join(pservers), "transpile: pservers")
            )
            if not endpoints:
                raise InvalidArgument("transpile: pservers lists no endpoint")
        else:
            endpoints = []
            trainer_endpoints = (
                parse_endpoint_list(trainers, "transpile: trainers")
                if isinstance(trainers, str)
                else []
            )
            count = len(trainer_endpoints) if trainer_endpoints else _trainer_count(trainers)
            if count > 1 and not trainer_endpoints:
                raise InvalidArgument(
                    f"transpile: mode {cfg.mode!r} with {count} trainers needs trainers as their "
                    "endpoints ('ip:port,ip:port,...'), where the ranks meet"
                )
        if isinstance(trainer_id, bool) or not isinstance(trainer_id, int):
            raise InvalidArgument(f"transpile: trainer_id must be an integer, got {trainer_id!r}")
        if not 0 <= trainer_id < count:
            raise InvalidArgument(
                f"transpile: trainer_id {trainer_id} is out of range for {count} trainers "
                f"(valid: 0 to {count - 1})"
            )
        rule, params_grads = recover_optimizer(main, startup)
        if cfg.mode == "pserver":
            sync = sync_mode if cfg.sync_mode is None else cfg.sync_mode
            strategy = _ps_strategy(bool(sync), cfg)
            self._plan = ps_pass.rewrite(main, startup, rule, params_grads, strategy)
            place_dense(self._plan, endpoints, cfg)
        else:
            collective_pass.rewrite(
                main, startup, rule, params_grads, DistributedStrategy(), nranks=count
            )
            self._trainer_endpoints = trainer_endpoints
            add_run_listener(self._connect_collective)
        self._main, self._endpoints = main, endpoints
        self._trainers, self._trainer_id = count, trainer_id

    def _connect_collective(self) -> None:
        """Before the first run after a collective transpile (the startup program broadcasts
        rank 0's parameters): the ranks meet through a TCP store trainer 0 serves on its
        endpoint, as Paddle's startup program meets to exchange the NCCL id."""
        remove_run_listener(self._connect_collective)
        endpoints, rank = self._trainer_endpoints, self._trainer_id
        host = parse_endpoint(endpoints[rank], "transpile: trainers")[0] if endpoints else None
        role = UserDefinedRoleMaker(
            current_id=rank,
            role=Role.WORKER,
            worker_num=self._trainers,
            worker_endpoints=endpoints,
            is_collective=True,
            gloo=GlooConfig(hostname=host or "127.0.0.1"),
        )
        store: Any = None
        if self._trainers > 1:
            # Before the group's liveness listener would take trainer 0's endpoint.
            host0, port0 = parse_endpoint(endpoints[0], "transpile: trainers")
            if rank == 0:
                self._store_server = _core.TcpStoreServer(host0, port0)
            store = _core.TcpStore(host0, port0, connect_timeout_s=role.gloo.timeout_s)
        self._collective.ensure_group(role, default_resources(), lambda: store)

    @property
    def plan(self) -> ps_pass.PsPlan:
        """The parameter-server plan transpile() made (the tables, the dense placement)."""
        if self._plan is None:
            raise InvalidArgument(
                "DistributeTranspiler: call transpile(...) with mode 'pserver' first"
            )
        return self._plan

    # -- trainer -----------------------------------------------------------------------------
    def get_trainer_program(self, wait_port: bool = True) -> Program:
        """The rewritten main program. In pserver mode this process becomes trainer
        `trainer_id`: its communicator starts as soon as the startup program has run (in the
        global scope) and stops at exit, after which the servers stop once every trainer has."""
        if self._main is None:
            raise InvalidArgument("get_trainer_program: call transpile(...) first")
        if self._plan is not None and self._worker is None:
            role = UserDefinedRoleMaker(
                current_id=self._trainer_id,
                role=Role.WORKER,
                worker_num=self._trainers,
                server_endpoints=self._endpoints,
            )
            self._worker = PsRuntime(role, self._plan, default_resources())
            # Connects now (waiting for the servers, as Paddle's wait_port does) and starts the
            # communicator once the startup program has run in the global scope.
            self._worker.init_worker(global_scope())
            atexit.register(_stop_quietly, self._worker)
        return self._main

    # -- server ------------------------------------------------------------------------------
    def get_pserver_program(self, endpoint: str) -> "PserverProgram":
        """The program of the server at `endpoint`: exe.run(it) serves until the job stops."""
        index = self._server_index(endpoint, "get_pserver_program")
        return PserverProgram(self, index)

    def get_pserver_programs(self, endpoint: str) -> tuple["PserverProgram", Program]:
        """The program of the server at `endpoint` and its startup program, in one call."""
        index = self._server_index(endpoint, "get_pserver_programs")
        return PserverProgram(self, index), self.get_startup_program(endpoint)

    def get_startup_program(
        self,
        endpoint: str,
        pserver_program: "PserverProgram | None" = None,
        startup_program: Program | None = None,
    ) -> Program:
        """A server's startup program: empty, as Fleet's servers build and initialise their
        tables themselves when they start serving."""
        self._server_index(endpoint, "get_startup_program")
        return Program()

    def _server_index(self, endpoint: str, what: str) -> int:
        self.plan  # noqa: B018 (raises before a pserver transpile)
        if endpoint not in self._endpoints:
            raise InvalidArgument(
                f"{what}: endpoint {endpoint!r} is not one of the pservers transpile() was "
                f"given ({', '.join(self._endpoints)})"
            )
        return self._endpoints.index(endpoint)

    def serve(self, index: int) -> None:
        """Runs server `index` of the transpiled job until the trainers stop it."""
        if self._worker is not None or _environment_role() == "TRAINER":
            raise InvalidArgument(
                f"the pserver program of {self._endpoints[index]} was run in a trainer process "
                f"(trainer_id {self._trainer_id}"
                + (", PADDLE_TRAINING_ROLE=TRAINER" if _environment_role() == "TRAINER" else "")
                + "); run it in the server's own process"
            )
        role = UserDefinedRoleMaker(
            current_id=index,
            role=Role.SERVER,
            worker_num=self._trainers,
            server_endpoints=self._endpoints,
        )
        server = PsRuntime(role, self.plan, default_resources())
        server.init_server()
        server.run_server()


class PserverProgram(Program):
    """A server's program: `Executor.run` hands it the run instead of running ops (as Paddle's
    listen_and_serv op blocks the executor), and returns when the job stops."""

    def __init__(self, transpiler: DistributeTranspiler, index: int) -> None:
        super().__init__()
        self._transpiler = transpiler
        self.server_index = index

    def run_in_executor(self) -> list[Any]:
        self._transpiler.serve(self.server_index)
        return []


def recover_optimizer(main: Program, startup: Program) -> tuple[optimizers.Optimizer, list]:
    """The optimizer (rule and hyper-parameters) and (parameter, gradient) pairs a minimized
    program's update ops show; InvalidArgument for a rule the servers cannot apply or a mix."""
    block = main.global_block()
    updates = [
        op
        for op in block.ops
        if op.attrs.get(OP_ROLE_ATTR) == OP_ROLE_OPTIMIZE and op.input("Param")
    ]
    if not updates:
        raise InvalidArgument(
            "transpile: the program has no optimizer update op; call "
            "optimizer.minimize(loss) before transpile()"
        )
    kinds = sorted({op.type for op in updates})
    if len(kinds) > 1 or kinds[0] not in _RULES:
        raise InvalidArgument(
            f"transpile: the program updates its parameters with {kinds}; the transpiler takes "
            f"one optimizer of {sorted(_RULES)}"
        )
    first = updates[0]
    lr = _startup_value(startup, first.input("LearningRate")[0], "learning rate")
    attrs = first.attrs
    if first.type == "adam":
        rule: optimizers.Optimizer = optimizers.Adam(
            lr,
            beta1=attrs.get("beta1", 0.9),
            beta2=attrs.get("beta2", 0.999),
            epsilon=attrs.get("epsilon", 1e-8),
            lazy_mode=bool(attrs.get("lazy_mode", False)),
        )
    elif first.type == "adagrad":
        initial = _startup_value(startup, first.input("Moment")[0], "Adagrad moment")
        rule = optimizers.Adagrad(
            lr, epsilon=attrs.get("epsilon", 1e-6), initial_accumulator_value=initial
        )
    else:
        rule = optimizers.SGD(lr)
    pairs = [(block.var(op.input("Param")[0]), block.var(op.input("Grad")[0])) for op in updates]
    return rule, pairs


def _startup_value(startup: Program, name: str, what: str) -> float:
    for op in startup.global_block().ops:
        if op.type == "fill_constant" and op.output_names == [name]:
            return float(op.attrs["value"])
    raise InvalidArgument(
        f"transpile: the {what} '{name}' is not a constant set by the startup program; the "
        "parameter servers need a constant learning rate"
    )


def place_dense(
    plan: ps_pass.PsPlan, endpoints: list[str], cfg: DistributeTranspilerConfig
) -> None:
    """Where the dense parameters live. slice_var_up: the packed dense table is cut into blocks
    of min_block_size elements, block b on server b mod servers (so a variable of at least
    min_block_size elements spreads over the servers). Otherwise each variable stays whole on the
    server split_method picks: the table's blocks are as large as the largest variable, and each
    server's variables are packed into its own blocks (the gaps are never read or written)."""
    config = plan.dense_config
    if config is None:
        return
    if cfg.slice_var_up:
        config.dense_block_size = cfg.min_block_size
        return
    servers = len(endpoints)
    block_size = max(d.numel for d in plan.dense)
    chosen = cfg.split_method(endpoints).dispatch([d.param for d in plan.dense])
    next_block = list(range(servers))  # a server's current block: s, s + servers, ...
    used = [0] * servers
    last_block = 0
    for dense, endpoint in zip(plan.dense, chosen):
        s = endpoints.index(endpoint)
        if used[s] + dense.numel > block_size:
            next_block[s] += servers
            used[s] = 0
        dense.offset = next_block[s] * block_size + used[s]
        used[s] += dense.numel
        last_block = max(last_block, next_block[s])
    config.dim = (last_block + 1) * block_size
    config.dense_block_size = block_size


def _ps_strategy(sync: bool, cfg: DistributeTranspilerConfig) -> DistributedStrategy:
    """The parameter-server mode the transpiler settings name, as Paddle reads them: GEO first,
    then sync, then half-async, else async."""
    if cfg.geo_sgd_mode:
        return DistributedStrategyFactory.create("geo", update_frequency=cfg.geo_sgd_need_push_nums)
    if sync:
        return DistributedStrategyFactory.create("sync")
    return DistributedStrategyFactory.create("half_async" if cfg.half_async else "async")


def _trainer_count(trainers: Any) -> int:
    if isinstance(trainers, bool) or not isinstance(trainers, int) or trainers < 1:
        raise InvalidArgument(f"transpile: trainers must be an integer >= 1, got {trainers!r}")
    return trainers


def _environment_role() -> str:
    """PADDLE_TRAINING_ROLE as the distributed manual's scripts set it ("" when unset)."""
    return os.environ.get("PADDLE_TRAINING_ROLE", os.environ.get("TRAINING_ROLE", "")).upper()


def _stop_quietly(worker: PsRuntime) -> None:
    if worker.communicator is not None:
        worker.stop_worker()


__all__ = ["DistributeTranspiler", "PserverProgram", "place_dense", "recover_optimizer"]
