"""Runs a data-parallel plan (`fleet.compiler`) on the C++ engine: `Executor.run` of a
CompiledProgram built with_data_parallel lands here.

A fed batch is cut into the replicas' shares in C++ as Paddle's ParallelExecutor cuts it
(`_core.split_batch`: ceil(batch / replicas) samples a share, an error when a replica would get
none); a list of feed dicts gives each replica its own. Fetched values come back merged as
Paddle merges them: the replicas' values concatenated along the first dimension (a loss of
shape [1] becomes shape [replicas]), lod offsets joined.

FLEET_DP_SPIN_US (read when a runner is made; default 50): how many microseconds a replica
waiting for another polls before it sleeps, 0 to sleep at once. A poll also stops as soon as the
replica finds it lost its core (a machine with fewer free cores than replicas), so a longer one
costs CPU only where a core is free. `DataParallelRunner.polls_given_up` counts the waits that
slept, by what they waited for.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

import numpy as np

from fleet import _core
from fleet.compiler import DataParallelPlan
from fleet.errors import InvalidArgument
from fleet.trainer import CheckedPass, DatasetRunResult

SPIN_ENV = "FLEET_DP_SPIN_US"
DEFAULT_SPIN_US = 50


def spin_before_sleep_us() -> int:
    """The replicas' poll before sleeping, in microseconds, from FLEET_DP_SPIN_US."""
    value = os.environ.get(SPIN_ENV, "")
    if value == "":
        return DEFAULT_SPIN_US
    try:
        spin = int(value)
    except ValueError:
        spin = -1
    if not 0 <= spin <= 1_000_000:
        raise InvalidArgument(
            f"{SPIN_ENV} must be an integer number of microseconds in [0, 1000000], got {value!r}"
        )
    return spin


class DataParallelRunner:
    """The engine of one plan on one executor and root scope; prepared once, run per step.

    `overlap_reduction`: reduce the gradients while the replicas still run the backward pass
    (the engine does when the owners' shares are balanced), or after it; None: as the plan's
    BuildStrategy says. Both give the same parameters, bit for bit."""

    def __init__(
        self,
        core_executor: Any,
        plan: DataParallelPlan,
        scope: Any,
        seed: int,
        overlap_reduction: bool | None = None,
    ) -> None:
        self.plan = plan
        options = _core.DataParallelOptions()
        options.replicas = plan.replicas
        options.all_reduce = plan.all_reduce
        options.gradient_scale = plan.gradient_scale
        options.gradients = list(plan.gradients)
        options.gradient_owners = list(plan.owners)
        options.gradient_row_parts = [plan.row_parts.get(g, "") for g in plan.gradients]
        options.gradient_product_x = [plan.products.get(g, ("", ""))[0] for g in plan.gradients]
        options.gradient_product_dout = [plan.products.get(g, ("", ""))[1] for g in plan.gradients]
        options.seed = seed
        options.prelude_phases = plan.prelude_phases
        options.overlap_reduction = (
            plan.overlap_reduction if overlap_reduction is None else overlap_reduction
        )
        options.even_barrier_work = plan.even_barrier_work
        options.share_barrier_work = plan.share_barrier_work
        options.early_barrier_work = plan.early_barrier_work
        options.spin_before_sleep_us = spin_before_sleep_us()

        def prepare(desc: Any) -> Any:
            return core_executor.prepare(desc.SerializeToString(), 0)

        update = [[prepare(d) if d is not None else None for d in phase] for phase in plan.phases]
        self._engine = _core.DataParallelEngine(
            core_executor, prepare(plan.compute), update, scope, options
        )

    @property
    def replicas(self) -> int:
        return self.plan.replicas

    @property
    def overlapped_steps(self) -> int:
        """Steps whose gradient reduction overlapped the replicas' backward pass."""
        return self._engine.overlapped_steps()

    @property
    def deferred_reductions(self) -> int:
        """Gradients whose reduction a replica keeps, every overlapped step, until every
        replica has finished the backward pass, although they are final earlier: the replica
        with less work after that barrier takes on some, so that the replicas' work on both
        sides of it is even (0 when it already is, and before the first overlapped step)."""
        return self._engine.deferred_reductions()

    @property
    def shares_barrier_work(self) -> bool:
        """Whether a replica done with its own work after an overlapped step's barrier takes
        another's (BuildStrategy.share_barrier_work, on a plan whose update groups each read
        one gradient their replica reduces)."""
        return self._engine.shares_barrier_work()

    @property
    def shared_barrier_tasks(self) -> int:
        """Tasks of the work after an overlapped step's barrier (a gradient's last reduction
        and the update ops that read it) that a replica ran for another, having finished its
        own, since the runner was made (BuildStrategy.share_barrier_work)."""
        return self._engine.shared_barrier_tasks()

    @property
    def early_barrier_tasks(self) -> int:
        """Tasks of that work a replica ran while it waited at the barrier for a slower one,
        since the runner was made (BuildStrategy.early_barrier_work)."""
        return self._engine.early_barrier_tasks()

    @property
    def polls_given_up(self) -> dict[str, int]:
        """Replica waits whose poll (FLEET_DP_SPIN_US) gave up, each a likely sleep and wake-up,
        since the runner was made, by what they waited for: `for_work` (replicas 1.. waiting for
        the next step or phase), `for_workers` (replica 0 waiting for the others to finish one),
        `for_compute` (a replica done with an overlapped compute program, for the others)."""
        return dict(self._engine.polls_given_up())

    def run(
        self,
        feed: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        fetch_names: list[str],
        return_numpy: bool = True,
    ) -> list[Any]:
        """One step. `feed`: name -> LoDTensor (the whole batch, split here) or one such dict a
        replica."""
        if isinstance(feed, Mapping):
            names = list(feed)
            split = [_core.split_batch(feed[n], self.replicas, n) for n in names]
            shares = [[pieces[r] for pieces in split] for r in range(self.replicas)]
        else:
            per_replica = list(feed)
            if len(per_replica) != self.replicas:
                raise InvalidArgument(
                    f"data-parallel run: a list feed needs one dict a replica, got "
                    f"{len(per_replica)} dicts for {self.replicas} replicas"
                )
            names = list(per_replica[0]) if per_replica else []
            for r, f in enumerate(per_replica):
                if sorted(f) != sorted(names):
                    raise InvalidArgument(
                        f"data-parallel run: replica {r}'s feed has {sorted(f)}, replica 0's "
                        f"has {sorted(names)}"
                    )
            shares = [[f[n] for n in names] for f in per_replica]
        fetched = self._engine.step(names, shares, fetch_names)
        return [
            merge_fetched(name, [per[i] for per in fetched], return_numpy)
            for i, name in enumerate(fetch_names)
        ]

    def run_dataset(self, checked: CheckedPass) -> DatasetRunResult:
        """One pass of a dataset, one batch a replica per step (train_from_dataset of a
        data-parallel program; the replicas come from the CompiledProgram, not `thread`)."""
        options = _core.DataParallelPassOptions()
        options.fetch_names = checked.fetch_names
        options.fetch_labels = checked.fetch_labels
        options.print_period = checked.print_period
        raw = self._engine.run_dataset(checked.dataset.pass_dataset(), options, checked.print_fn)
        read = raw.read
        names = checked.fetch_names
        return DatasetRunResult(
            batches=raw.batches,
            samples=raw.samples,
            seconds=raw.seconds,
            lines=read.lines,
            skipped_lines=read.bad_lines,
            skipped_examples=list(read.bad_line_examples),
            fetch=dict(zip(names, raw.last_fetch)),
            fetch_lod={n: [] for n in names},
            fetch_sums=dict(zip(names, raw.fetch_sums)),
            profile={},
        )


def merge_fetched(name: str, values: list[Any], return_numpy: bool) -> Any:
    """The replicas' values of one fetch variable as one, concatenated along dimension 0."""
    arrays = [v.numpy() for v in values]
    if any(a.ndim == 0 for a in arrays):
        merged = np.stack(arrays)
    else:
        try:
            merged = np.concatenate(arrays, axis=0)
        except ValueError as e:
            shapes = [list(a.shape) for a in arrays]
            raise InvalidArgument(
                f"fetch '{name}': the replicas' values have shapes {shapes}, which cannot be "
                f"concatenated along the first dimension ({e})"
            ) from None
    if return_numpy:
        return merged
    tensor = _core.LoDTensor()
    tensor.set(merged)
    lods = [v.lod() for v in values]
    if lods and lods[0]:
        tensor.set_lod(_join_lods(lods))
    return tensor


def _join_lods(lods: list[list[list[int]]]) -> list[list[int]]:
    """Offsets of the replicas' lods, each level shifted to follow the previous replica's."""
    levels = len(lods[0])
    joined: list[list[int]] = [[0] for _ in range(levels)]
    for lod in lods:
        for level in range(levels):
            base = joined[level][-1]
            joined[level].extend(base + o for o in lod[level][1:])
    return joined


__all__ = ["DataParallelRunner", "merge_fetched"]
