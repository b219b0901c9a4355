"""fluid.ParallelExecutor: the older spelling of an Executor running a CompiledProgram
with_data_parallel. The replicas are CPU threads (CPU_NUM, default the machine's cores)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from fleet.compiler import BuildStrategy, CompiledProgram, ExecutionStrategy, cpu_replicas
from fleet.errors import InvalidArgument, Unavailable
from fleet.executor import CPUPlace, Executor, global_scope
from fleet.framework import Program, default_main_program


def cpu_places(device_count: int | None = None) -> list[CPUPlace]:
    """fluid.cpu_places: `device_count` CPU places (default CPU_NUM, else the cores)."""
    return [CPUPlace() for _ in range(cpu_replicas(device_count))]


class ParallelExecutor:
    """Runs `main_program` data parallel on CPU replicas in `scope` (default: the scope of
    `share_vars_from` when given, as Paddle's executor runs on the variables of the one it shares
    them from, else the global scope when it is made). The replicas read the parameters of the
    scope they run in: sharing needs no copy."""

    def __init__(
        self,
        use_cuda: bool,
        loss_name: str | None = None,
        main_program: Program | None = None,
        share_vars_from: "ParallelExecutor | None" = None,
        exec_strategy: ExecutionStrategy | None = None,
        build_strategy: BuildStrategy | None = None,
        num_trainers: int = 1,
        trainer_id: int = 0,
        scope: Any = None,
    ) -> None:
        if use_cuda:
            raise Unavailable(
                "ParallelExecutor(use_cuda=True): data parallelism runs on CPU replicas in this "
                "version; pass use_cuda=False"
            )
        if num_trainers != 1 or trainer_id != 0:
            raise Unavailable(
                f"ParallelExecutor: num_trainers={num_trainers}, trainer_id={trainer_id}: "
                "multi-process training goes through fleet.distributed_optimizer or "
                "DistributeTranspiler; ParallelExecutor runs one process"
            )
        if share_vars_from is not None and not isinstance(share_vars_from, ParallelExecutor):
            raise InvalidArgument(
                "ParallelExecutor: share_vars_from must be a ParallelExecutor, got "
                f"{type(share_vars_from).__name__}"
            )
        self._program = main_program or default_main_program()
        if scope is None:
            scope = share_vars_from._scope if share_vars_from is not None else global_scope()
        self._scope = scope
        self._compiled = CompiledProgram(self._program).with_data_parallel(
            loss_name=loss_name, build_strategy=build_strategy, exec_strategy=exec_strategy
        )
        self._executor = Executor(CPUPlace())

    @property
    def device_count(self) -> int:
        return self._compiled.replicas

    def run(
        self,
        fetch_list: Sequence[Any],
        feed: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        feed_dict: Mapping[str, Any] | None = None,
        return_numpy: bool = True,
    ) -> list[Any]:
        """One step; `feed` is the whole batch (split across the replicas) or one dict a
        replica. Fetched values come back concatenated over the replicas."""
        if feed is None and feed_dict is not None:
            feed = feed_dict
        return self._executor.run(
            self._compiled,
            feed=feed,
            fetch_list=fetch_list,
            scope=self._scope,
            return_numpy=return_numpy,
        )

    def drop_local_exe_scopes(self) -> None:
        """Frees the replicas' scopes; the next run makes them again."""
        self._executor.close()


__all__ = ["ParallelExecutor", "cpu_places"]
