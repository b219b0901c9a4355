"""Distributed strategies: how a program trains across processes.

Two spellings, one meaning (so that a Paddle Fleet script ports by changing imports):

* the 1.x factory: ``DistributedStrategyFactory.create_sync_strategy()``,
  ``create_half_async_strategy()``, ``create_async_strategy()``,
  ``create_geo_strategy(update_frequency)``;
* the 2.x object: ``strategy = DistributedStrategy()`` with ``strategy.a_sync`` (False: sync)
  and ``strategy.a_sync_configs = {"k_steps": N, ...}`` (0: async, > 0: GEO every N steps), plus
  the collective knobs (``fuse_all_reduce_ops``, ``fuse_grad_size_in_MB``, ``gradient_merge``,
  ``gradient_merge_configs``, ``nccl_comm_num``).

Both produce a :class:`DistributedStrategy`; ``strategy.mode`` is the parameter-server mode it
stands for. Every setter validates: an unknown key or a bad value is an ``InvalidArgument`` that
lists the valid ones.
"""

from __future__ import annotations

import dataclasses
import enum
import os
from typing import Any, ClassVar, Mapping

from fleet.compiler import BuildStrategy, ExecutionStrategy
from fleet.errors import InvalidArgument
from fleet.optimizer import Optimizer
from fleet.ps_strategy_configs import (
    ProgramConfig,
    ServerRuntimeConfig,
    TrainerRuntimeConfig,
    notice_once,
)


class PsMode(enum.Enum):
    SYNC = "sync"
    ASYNC = "async"
    HALF_ASYNC = "half_async"
    GEO = "geo"


@dataclasses.dataclass
class AsyncConfig:
    """Knobs of the async and half-async communicators (and GEO's k_steps).

    send_queue_size: gradients a variable's send queue holds before training waits.
    max_merge_var_num: gradients of one variable merged into one push.
    send_wait_times: 10 ms waits for more gradients before a partial merge is pushed.
    thread_pool_size: sending threads.
    independent_recv_thread: refresh dense parameters from their own thread (True) or after
        every round of sends (False).
    max_dense_staleness: async only: gradients of its own a trainer thread's dense parameters
        may lack when a step starts; the step waits for the refresh otherwise. 0 (default): every
        step starts from values that include the thread's previous gradient (CTR-DNN, 2 workers:
        within 0.003 test AUC of one process, about 15% fewer samples/s than without a bound).
        -1: no bound, as Paddle's async: the dense values lag by whatever the queues and the
        network hold (0.01-0.02 test AUC lost on the same job). Sparse rows: see
        max_sparse_staleness.
    max_sparse_staleness: async only: gradients of its own a worker's rows of a sparse table may
        lack when it pulls them. S >= 0: a pull waits until the servers acknowledged every push
        of the table the worker queued but the last S, and prefetch_sparse is off (a prefetch
        starts before the push is acknowledged). -1 (default): no bound, as Paddle's async. For
        tables whose frequent rows are in every batch with a large learning rate (word2vec);
        CTR models measured no gain.
    prefetch_sparse: async dataset passes pull the next batch's rows of a sparse table as soon
        as the current batch's gradients of it are queued, while the rest of the step runs
        (True, default); False pulls at the step (CTR-DNN, 2 workers, dataset driver, 11-12
        runs each: test AUC 0.7674 with the prefetch, 0.7678 without, within the noise; about
        6% fewer samples/s without). GEO dataset passes: the rows of the next batch the worker
        has not pulled yet are pulled while the current batch runs (new rows are one step
        staler; a one-worker job trains bit for bit the same); False pulls them at the step.
    k_steps: GEO's update frequency (0, or Paddle's default -1: not GEO).
    launch_barrier: workers wait for every server before training.
    rpc_timeout_s: the deadline in seconds of each call a worker makes to a server (pulls,
        pushes, stats; a barrier's is its own timeout plus this): a frozen or unreachable server
        is an error naming it once it passed. Any mode. Default 30.
    server_restarts: the job takes restarted servers (any mode). A server that died and was
        started again on its endpoint with the job's latest checkpoint (``fleet.init_server()``
        loads ``fleet.restart_checkpoint()`` by itself in such a job; or
        ``fleet.init_server(dirname)``) is trusted again: the workers wait for it within their
        RPC timeout, resend the calls its death cut, say so on stderr and go on from the
        checkpoint's rows. A server that came back without loading one is refused as without
        this option (the job fails naming it). Default False.
    worker_restarts: the job takes restarted workers (any mode; the servers act on it). A worker
        whose process or machine died is waited for instead of failing the job: the servers'
        barriers wait for it within their timeout, and a worker started again with the same id
        (by a cluster manager) rejoins: it passes init_worker at once, pulls the current
        parameters and trains on, resuming its data where its own checkpoint says. In sync mode
        a worker that dies within a step may count that step's gradients twice; one that dies
        between steps does not. A worker's reported failure (its script raised) still fails
        the job. Default False.
    local_transport: how a worker talks to a server whose endpoint has its own host (the role
        maker's hostname): "off" (or False), loopback TCP; "shm", the floats of the dense
        pushes, push-pulls and pulls go through a memory segment the worker shares with the
        server (csrc/ps/detail/shm_segment.h), the calls themselves over TCP as before, and a
        worker whose server cannot map it (another container) says so on stderr and keeps the
        floats on the wire; "unix" (or True), a server also listens on a Unix-domain socket
        named after its endpoint, and the worker calls it over it, with the same protocol and
        checks (a worker that finds no socket there says so on stderr and uses TCP; servers on
        port 0 have no socket). Default "shm". Measured per 1.7 MB dense push + pull (CTR-DNN's
        Adam table, both processes' CPU, quiet machine): shared memory 0.28 of loopback TCP's,
        and an async CTR-DNN job 12-18% faster; the Unix socket 9% less than TCP, and no change
        in the jobs (docs/benchmarks.md).

    Keys Paddle 2.6.2 prints in a_sync_configs that Fleet does not act on (PADDLE_ONLY_KEYS) are
    accepted, kept in `paddle_only` (so that a printed config assigned back round-trips) and
    announced once.
    """

    send_queue_size: int = 16
    max_merge_var_num: int = 4
    send_wait_times: int = 1
    thread_pool_size: int = 1
    independent_recv_thread: bool = False
    max_dense_staleness: int = 0
    prefetch_sparse: bool = True
    max_sparse_staleness: int = -1
    k_steps: int = 0
    launch_barrier: bool = True
    rpc_timeout_s: float = 30.0
    server_restarts: bool = False
    worker_restarts: bool = False
    local_transport: str = "shm"
    paddle_only: dict = dataclasses.field(default_factory=dict)

    # The keys the runtime reads in every mode (the others tune the async and half-async
    # communicators).
    ANY_MODE_KEYS: ClassVar[frozenset[str]] = frozenset(
        {"rpc_timeout_s", "server_restarts", "worker_restarts", "local_transport"}
    )

    # Key -> (type, why Fleet does not act on it).
    PADDLE_ONLY_KEYS: ClassVar[dict[str, tuple[type, str]]] = {
        "min_send_grad_num_before_recv": (int, "the dense refresh follows max_dense_staleness"),
        "runtime_split_send_recv": (bool, "the dense table is split in blocks by the servers"),
        "heter_worker_device_guard": (str, "Fleet has no heterogeneous workers"),
        "lr_decay_steps": (int, "a decayed learning rate is stepped by the program's schedule"),
        "use_ps_gpu": (int, "Fleet's parameter servers keep their tables in host memory"),
        "use_gpu_graph": (int, "Fleet has no GPU graph engine"),
    }

    def as_dict(self) -> dict[str, Any]:
        """The settings as a_sync_configs shows them (Fleet's keys, then the Paddle-only ones)."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        values.update(values.pop("paddle_only"))
        return values

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], where: str) -> "AsyncConfig":
        config = cls()
        config.update(values, where)
        return config

    def update(self, values: Mapping[str, Any], where: str) -> None:
        if not isinstance(values, Mapping):
            raise InvalidArgument(f"{where} must be a dict, got {type(values).__name__}")
        valid = {f.name: f.type for f in dataclasses.fields(self) if f.name != "paddle_only"}
        for key, value in values.items():
            if key in self.PADDLE_ONLY_KEYS:
                self._accept_paddle_only(key, value, where)
                continue
            if key not in valid:
                names = sorted([*valid, *self.PADDLE_ONLY_KEYS])
                raise InvalidArgument(
                    f"{where}: unknown key {key!r}; valid keys: {', '.join(names)}"
                )
            if key in (
                "independent_recv_thread",
                "launch_barrier",
                "prefetch_sparse",
                "server_restarts",
                "worker_restarts",
            ):
                if not isinstance(value, bool):
                    raise InvalidArgument(f"{where}[{key!r}] must be a bool, got {value!r}")
            elif key == "local_transport":
                value = _local_transport(value, f"{where}[{key!r}]")
            elif key == "rpc_timeout_s":
                value = _seconds(value, f"{where}[{key!r}]")
            else:
                minimum = {
                    "k_steps": -1,
                    "max_dense_staleness": -1,
                    "max_sparse_staleness": -1,
                }.get(key, 1)
                if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                    raise InvalidArgument(
                        f"{where}[{key!r}] must be an integer >= {minimum}, got {value!r}"
                    )
            setattr(self, key, value)

    def _accept_paddle_only(self, key: str, value: Any, where: str) -> None:
        kind, why = self.PADDLE_ONLY_KEYS[key]
        if isinstance(value, bool) != (kind is bool) or not isinstance(value, kind):
            raise InvalidArgument(f"{where}[{key!r}] must be a {kind.__name__}, got {value!r}")
        self.paddle_only[key] = value
        notice_once(
            f"a_sync_configs.{key}",
            f"{where}[{key!r}] is accepted and has no effect in Fleet: {why}",
        )


_GRADIENT_MERGE_KEYS = {"k_steps": int, "avg": bool}

# The longest RPC timeout taken: a day. Anything longer is a typo (milliseconds for seconds?)
# and would hide a frozen server for as long.
_MAX_RPC_TIMEOUT_S = 86400.0


def _local_transport(value: Any, where: str) -> str:
    """a_sync_configs["local_transport"]: "off", "shm" or "unix"; a bool means "off" or "unix"
    (its meaning before "shm"). InvalidArgument naming `where` else."""
    if isinstance(value, bool):
        return "unix" if value else "off"
    if value not in ("off", "shm", "unix"):
        raise InvalidArgument(f'{where} must be "off", "shm", "unix" or a bool, got {value!r}')
    return value


def _seconds(value: Any, where: str) -> float:
    """A timeout in seconds: a number in (0, 86400]; InvalidArgument naming `where` else."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (0 < value <= _MAX_RPC_TIMEOUT_S)
    ):
        raise InvalidArgument(
            f"{where} must be a number of seconds in (0, {_MAX_RPC_TIMEOUT_S:.0f}] (the deadline "
            f"of each call a worker makes to a parameter server), got {value!r}"
        )
    return float(value)


class DistributedStrategy:
    """A distributed training strategy (see the module docstring). Attributes are validated on
    assignment; unknown attributes are refused."""

    _FIELDS = (
        "a_sync",
        "a_sync_configs",
        "half_async",
        "fuse_all_reduce_ops",
        "fuse_grad_size_in_MB",
        "gradient_merge",
        "gradient_merge_configs",
        "nccl_comm_num",
        "sparse_table_configs",
        "table_optimizers",
    )

    def __init__(self) -> None:
        object.__setattr__(self, "_a_sync", True)
        object.__setattr__(self, "_half_async", False)
        object.__setattr__(self, "_async_config", AsyncConfig())
        object.__setattr__(self, "_fuse_all_reduce_ops", True)
        object.__setattr__(self, "_fuse_grad_size_in_MB", 32.0)
        object.__setattr__(self, "_gradient_merge", False)
        object.__setattr__(self, "_gradient_merge_configs", {"k_steps": 1, "avg": True})
        object.__setattr__(self, "_nccl_comm_num", 1)
        object.__setattr__(
            self,
            "_sparse_table_configs",
            {"count_filter": 0, "storage": "memory", "memory_budget_mb": 0.0, "ssd_path": ""},
        )
        object.__setattr__(self, "_table_optimizers", {})
        # The 1.x accessors' objects (get/set_program_config, ...): fleet/ps_strategy_configs.py.
        object.__setattr__(self, "_program_config", ProgramConfig())
        object.__setattr__(self, "_server_runtime_config", ServerRuntimeConfig())
        object.__setattr__(self, "_build_strategy", BuildStrategy())
        object.__setattr__(self, "_execute_strategy", ExecutionStrategy())

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._FIELDS:
            raise InvalidArgument(
                f"DistributedStrategy has no setting {name!r}; valid "
                f"settings: {', '.join(self._FIELDS)}"
            )
        object.__setattr__(self, name, value)  # the property setters below validate

    # -- parameter server ------------------------------------------------------------------
    @property
    def a_sync(self) -> bool:
        return self._a_sync

    @a_sync.setter
    def a_sync(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise InvalidArgument(f"DistributedStrategy.a_sync must be a bool, got {value!r}")
        object.__setattr__(self, "_a_sync", value)

    @property
    def half_async(self) -> bool:
        return self._half_async

    @half_async.setter
    def half_async(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise InvalidArgument(f"DistributedStrategy.half_async must be a bool, got {value!r}")
        object.__setattr__(self, "_half_async", value)

    @property
    def a_sync_configs(self) -> dict[str, Any]:
        return self._async_config.as_dict()

    @a_sync_configs.setter
    def a_sync_configs(self, values: Mapping[str, Any]) -> None:
        # As in Paddle, assigning a dict updates the keys it names and keeps the others.
        self._async_config.update(values, "DistributedStrategy.a_sync_configs")

    @property
    def async_config(self) -> AsyncConfig:
        return self._async_config

    @property
    def mode(self) -> PsMode:
        """The parameter-server mode: a_sync False -> SYNC; k_steps > 0 -> GEO; half_async ->
        HALF_ASYNC; otherwise ASYNC."""
        if not self._a_sync:
            return PsMode.SYNC
        if self._async_config.k_steps > 0:
            return PsMode.GEO
        return PsMode.HALF_ASYNC if self._half_async else PsMode.ASYNC

    # -- collective ------------------------------------------------------------------------
    @property
    def fuse_all_reduce_ops(self) -> bool:
        return self._fuse_all_reduce_ops

    @fuse_all_reduce_ops.setter
    def fuse_all_reduce_ops(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise InvalidArgument(
                f"DistributedStrategy.fuse_all_reduce_ops must be a bool, got {value!r}"
            )
        object.__setattr__(self, "_fuse_all_reduce_ops", value)

    @property
    def fuse_grad_size_in_MB(self) -> float:  # noqa: N802 (Paddle's name)
        return self._fuse_grad_size_in_MB

    @fuse_grad_size_in_MB.setter
    def fuse_grad_size_in_MB(self, value: float) -> None:  # noqa: N802
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise InvalidArgument(
                f"DistributedStrategy.fuse_grad_size_in_MB must be a positive number, got {value!r}"
            )
        object.__setattr__(self, "_fuse_grad_size_in_MB", float(value))

    @property
    def gradient_merge(self) -> bool:
        return self._gradient_merge

    @gradient_merge.setter
    def gradient_merge(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise InvalidArgument(
                f"DistributedStrategy.gradient_merge must be a bool, got {value!r}"
            )
        object.__setattr__(self, "_gradient_merge", value)

    @property
    def gradient_merge_configs(self) -> dict[str, Any]:
        return dict(self._gradient_merge_configs)

    @gradient_merge_configs.setter
    def gradient_merge_configs(self, values: Mapping[str, Any]) -> None:
        where = "DistributedStrategy.gradient_merge_configs"
        if not isinstance(values, Mapping):
            raise InvalidArgument(f"{where} must be a dict, got {type(values).__name__}")
        merged = dict(self._gradient_merge_configs)
        for key, value in values.items():
            if key not in _GRADIENT_MERGE_KEYS:
                raise InvalidArgument(
                    f"{where}: unknown key {key!r}; valid keys: "
                    f"{', '.join(sorted(_GRADIENT_MERGE_KEYS))}"
                )
            if key == "avg" and not isinstance(value, bool):
                raise InvalidArgument(f"{where}['avg'] must be a bool, got {value!r}")
            if key == "k_steps" and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise InvalidArgument(f"{where}['k_steps'] must be an integer >= 1, got {value!r}")
            merged[key] = value
        object.__setattr__(self, "_gradient_merge_configs", merged)

    @property
    def nccl_comm_num(self) -> int:
        return self._nccl_comm_num

    @nccl_comm_num.setter
    def nccl_comm_num(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidArgument(
                f"DistributedStrategy.nccl_comm_num must be an integer >= 1, got {value!r}"
            )
        object.__setattr__(self, "_nccl_comm_num", value)

    # -- parameter-server sparse tables ----------------------------------------------------
    @property
    def sparse_table_configs(self) -> dict[str, Any]:
        """Settings of every sparse table. ``count_filter``: a new id enters a table only once
        it has been pulled that many times (Paddle's CountFilterEntry); until then it reads as
        zeros and its gradients are dropped. 0 or 1: every id at once.

        ``storage``: ``"memory"`` (default) or ``"ssd"``: each server keeps the hot rows of a
        table in at most ``memory_budget_mb`` MiB of memory and the rest in a RocksDB database
        under ``ssd_path`` (a directory per table and server); values and checkpoints are those
        of an in-memory table. A server restarted without a checkpoint keeps nothing."""
        return dict(self._sparse_table_configs)

    @sparse_table_configs.setter
    def sparse_table_configs(self, values: Mapping[str, Any]) -> None:
        where = "DistributedStrategy.sparse_table_configs"
        if not isinstance(values, Mapping):
            raise InvalidArgument(f"{where} must be a dict, got {type(values).__name__}")
        merged = dict(self._sparse_table_configs)
        for key, value in values.items():
            merged[key] = _checked_table_setting(where, key, value)
        object.__setattr__(self, "_sparse_table_configs", merged)

    # -- per-table optimizers ----------------------------------------------------------------
    @property
    def table_optimizers(self) -> dict[str, Any]:
        """Parameter name -> optimizer that updates it instead of the one given to
        ``distributed_optimizer`` (e.g. Wide & Deep's wide part with Adagrad, the deep part with
        Adam). In a parameter-server job the named parameters must be sparse tables: each sparse
        table has its own server-side rule, while the dense parameters share one table and one
        rule. Names are checked against the program by ``minimize``."""
        return dict(self._table_optimizers)

    @table_optimizers.setter
    def table_optimizers(self, values: Mapping[str, Any]) -> None:
        where = "DistributedStrategy.table_optimizers"
        if not isinstance(values, Mapping):
            raise InvalidArgument(f"{where} must be a dict, got {type(values).__name__}")
        for name, optimizer in values.items():
            if not isinstance(name, str) or not name:
                raise InvalidArgument(f"{where}: keys must be parameter names, got {name!r}")
            if not isinstance(optimizer, Optimizer):
                raise InvalidArgument(
                    f"{where}[{name!r}] must be a fleet.optimizer optimizer, "
                    f"got {type(optimizer).__name__}"
                )
        object.__setattr__(self, "_table_optimizers", dict(values))

    # -- the 1.x parameter-server strategy's accessors ------------------------------------
    def get_program_config(self) -> ProgramConfig:
        """Paddle's DistributeTranspilerConfig: min_block_size, slice_var_up, split_method
        (what each does: fleet/ps_strategy_configs.py)."""
        return self._program_config

    def set_program_config(self, config: Any) -> None:
        """Takes a dict or the object get_program_config() returned."""
        self._program_config.update(config)

    def get_trainer_runtime_config(self) -> TrainerRuntimeConfig:
        """The communicator flags (communicator_send_queue_size, ...) of a_sync_configs."""
        return TrainerRuntimeConfig(
            self.mode.value,
            lambda: self.a_sync_configs,
            lambda values: setattr(self, "a_sync_configs", values),
        )

    def set_trainer_runtime_config(self, config: Any) -> None:
        self.get_trainer_runtime_config().update(config)

    def get_server_runtime_config(self) -> ServerRuntimeConfig:
        return self._server_runtime_config

    def set_server_runtime_config(self, config: Any) -> None:
        self._server_runtime_config.update(config)

    def get_build_strategy(self) -> BuildStrategy:
        """fluid.BuildStrategy of a 1.x strategy (a parameter-server job builds no graph)."""
        return self._build_strategy

    def set_build_strategy(self, build_strategy: BuildStrategy) -> None:
        if not isinstance(build_strategy, BuildStrategy):
            raise InvalidArgument(
                f"set_build_strategy takes a fleet.BuildStrategy, got "
                f"{type(build_strategy).__name__}"
            )
        object.__setattr__(self, "_build_strategy", build_strategy)

    def get_execute_strategy(self) -> ExecutionStrategy:
        """fluid.ExecutionStrategy of a 1.x strategy."""
        return self._execute_strategy

    def set_execute_strategy(self, execute_strategy: ExecutionStrategy) -> None:
        if not isinstance(execute_strategy, ExecutionStrategy):
            raise InvalidArgument(
                f"set_execute_strategy takes a fleet.ExecutionStrategy, got "
                f"{type(execute_strategy).__name__}"
            )
        object.__setattr__(self, "_execute_strategy", execute_strategy)

    def __repr__(self) -> str:
        return (
            f"DistributedStrategy(mode={self.mode.value}, a_sync_configs="
            f"{self.a_sync_configs}, fuse_all_reduce_ops={self.fuse_all_reduce_ops}, "
            f"fuse_grad_size_in_MB={self.fuse_grad_size_in_MB}, gradient_merge="
            f"{self.gradient_merge}, gradient_merge_configs={self.gradient_merge_configs})"
        )


class DistributedStrategyFactory:
    """The 1.x way to make a parameter-server strategy."""

    @staticmethod
    def create_sync_strategy() -> DistributedStrategy:
        strategy = DistributedStrategy()
        strategy.a_sync = False
        return strategy

    @staticmethod
    def create_async_strategy() -> DistributedStrategy:
        return DistributedStrategy()

    @staticmethod
    def create_half_async_strategy() -> DistributedStrategy:
        strategy = DistributedStrategy()
        strategy.half_async = True
        return strategy

    @staticmethod
    def create_geo_strategy(update_frequency: int = 100) -> DistributedStrategy:
        strategy = DistributedStrategy()
        if (
            isinstance(update_frequency, bool)
            or not isinstance(update_frequency, int)
            or update_frequency < 1
        ):
            raise InvalidArgument(
                f"create_geo_strategy: update_frequency must be an integer "
                f">= 1, got {update_frequency!r}"
            )
        strategy.a_sync_configs = {"k_steps": update_frequency}
        return strategy

    @staticmethod
    def create(
        mode: str | PsMode, update_frequency: int = 100, **a_sync_configs: Any
    ) -> DistributedStrategy:
        """The strategy of a mode named as a launch flag names it ("sync", "async",
        "half_async" or "geo"; GEO with `update_frequency`), with `a_sync_configs` keys: those
        every mode reads (AsyncConfig.ANY_MODE_KEYS: rpc_timeout_s, server_restarts,
        worker_restarts, local_transport) applied in every mode, the communicator's tuning keys
        (e.g. send_queue_size=1) in async and half-async only, and ignored in sync and GEO, whose
        communicators do not read them. InvalidArgument lists the modes for another name."""
        name = mode.value if isinstance(mode, PsMode) else mode
        makers = {
            PsMode.SYNC.value: DistributedStrategyFactory.create_sync_strategy,
            PsMode.ASYNC.value: DistributedStrategyFactory.create_async_strategy,
            PsMode.HALF_ASYNC.value: DistributedStrategyFactory.create_half_async_strategy,
            PsMode.GEO.value: lambda: DistributedStrategyFactory.create_geo_strategy(
                update_frequency
            ),
        }
        if name not in makers:
            raise InvalidArgument(
                f"DistributedStrategyFactory.create: unknown mode {mode!r}; valid modes: "
                f"{', '.join(makers)}"
            )
        strategy = makers[name]()
        if name not in (PsMode.ASYNC.value, PsMode.HALF_ASYNC.value):
            a_sync_configs = {
                key: value
                for key, value in a_sync_configs.items()
                if key in AsyncConfig.ANY_MODE_KEYS
            }
        if a_sync_configs:
            strategy.a_sync_configs = a_sync_configs
        return strategy


__all__ = ["AsyncConfig", "DistributedStrategy", "DistributedStrategyFactory", "PsMode"]


def _checked_table_setting(where: str, key: str, value: Any) -> Any:
    """One entry of ``sparse_table_configs``, checked (InvalidArgument naming it)."""
    if key == "count_filter":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidArgument(f"{where}['count_filter'] must be an integer >= 0, got {value!r}")
        return value
    if key == "storage":
        if value not in ("memory", "ssd"):
            raise InvalidArgument(f"{where}['storage'] must be 'memory' or 'ssd', got {value!r}")
        return value
    if key == "memory_budget_mb":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise InvalidArgument(
                f"{where}['memory_budget_mb'] must be a number > 0, got {value!r}"
            )
        return float(value)
    if key == "ssd_path":
        if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
            raise InvalidArgument(f"{where}['ssd_path'] must be a directory path, got {value!r}")
        return os.fspath(value)
    raise InvalidArgument(
        f"{where}: unknown key {key!r}; valid keys: count_filter, storage, memory_budget_mb, "
        "ssd_path"
    )
