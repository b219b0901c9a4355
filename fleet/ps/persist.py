"""Saving and restoring a parameter-server job: ``fleet.save_persistables`` and
``fleet.load_model`` (workers), ``fleet.init_server(dirname)`` (servers, see runtime.py).

A job's checkpoint directory holds two things:

* the servers' tables (every sparse table and the dense table, values and update-rule state),
  written by ``PsClient.save`` in the format of ``csrc/ps/checkpoint.h``: a manifest committed
  last, so a save that fails (a full disk, a server killed) leaves the previous save loadable;
* ``worker_persistables.npz``: worker 0's persistable variables that are not server parameters
  (the optimizer state a GEO worker keeps, metric accumulators such as the AUC op's histograms,
  counters), written to a temporary file and renamed, so it too is whole or the previous one.

Modes of save_persistables (Paddle's): 0 a base save (every row), 1 a delta save (rows created
or changed since the previous save into that directory; a load applies the base then every
delta in order), 2 values only: every sparse row without its update-rule state (about half the
bytes with Adagrad, a third with Adam); loading it starts the state afresh, so a job resumed
from it trains on with fresh accumulators. Dense tables, small, keep their state in every mode.
The export for serving (a pruned program plus values) is ``fleet.save_inference_model``.

Saves (save_persistables, save_inference_model) are one worker's calls, as in Paddle's idiom
``if fleet.is_first_worker(): fleet.save_persistables(exe, dirname)``: the first worker flushes
its own pending gradients and has the servers save, while the other workers train on or stop.
A call from another worker flushes that worker's gradients and returns (every worker calling it
keeps working). What a save holds is what the servers have applied when it starts (the rule of
docs/porting.md): in sync mode whole steps of the job (the first worker is not at the next step's
barrier while it saves), in async and half-async a point in the stream of pushes, in GEO the
servers' values after each worker's last exchange. For every worker's steps exactly, have every
worker call flush_worker() and barrier_worker() before the first one saves. A save into a path
that is a file is refused on every worker that calls it, naming the path.

load_model and shrink are every worker's calls: they meet before (the servers hold every step
each worker ran, its pushes flushed) and after (no worker trains on while worker 0 changes the
tables); `timeout` bounds each meeting.

Internal: scripts reach it through fleet.save_persistables, fleet.load_model, fleet.shrink
and fleet.save_inference_model.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
from typing import Any, Callable, Optional, Sequence

import numpy as np

from fleet.errors import InvalidArgument, Timeout
from fleet.model_files import check_directory
from fleet.ps import inference
from fleet.ps.client import PsClient
from fleet.ps.program_pass import PsPlan
from fleet.role_maker import RoleMakerBase
from fleet.scope import global_scope

logger = logging.getLogger("fleet.ps")

WORKER_FILE = "worker_persistables.npz"
SAVE_MODES = {0: "base", 1: "delta", 2: "values"}


# What a checkpoint operation needs of the started worker: its client and its communicator
# (InvalidArgument naming the API called before fleet.init_worker()).
Connection = Callable[[str], "tuple[PsClient, Any]"]


# The calls behind the workers' barrier names on the servers ('__load_begin_3__' is the fourth
# every-worker operation's start, in fleet.load_model), for errors that name the calls.
_CALL_OF_BARRIER = {
    "stop_worker": "fleet.stop_worker()",
    "init_worker": "fleet.init_worker()",
    "load": "fleet.load_model()",
    "shrink": "fleet.shrink()",
    "save": "fleet.save_persistables()",
    "export": "fleet.save_inference_model()",
    "sync_step": "a sync training step",
}
_BARRIER_NAME = re.compile(r"'__([a-z_]+?)(?:_begin|_end)?(?:_\d+)?__'")


def name_calls(message: str) -> str:
    """`message` with each workers' barrier it quotes followed by the call it belongs to."""

    def call(match: re.Match) -> str:
        what = _CALL_OF_BARRIER.get(match.group(1))
        return f"{match.group(0)} ({what})" if what else match.group(0)

    return _BARRIER_NAME.sub(call, message)


def meet(
    client: PsClient, name: str, num_workers: int, worker_id: int, timeout: float, api: str
) -> None:
    """Every worker's barrier `name` of the call `api`; a timeout names the calls the missing
    workers are in instead (when they wait at another barrier of the servers)."""
    try:
        client.barrier(name, num_workers, worker_id, timeout)
    except Timeout as e:
        raise Timeout(f"{api} on worker {worker_id}: {name_calls(str(e))}") from None


def worker_local_vars(plan: PsPlan, program: Any) -> list[str]:
    """Persistable variables of `program` that the worker itself owns: not fed, not a server
    parameter (the dense parameters are pulled from the servers, the sparse ones live there)."""
    served = {d.param for d in plan.dense} | {s.param for s in plan.sparse}
    return sorted(
        v.name
        for v in program.global_block().vars.values()
        if v.persistable and v.name not in served and v.name not in ("feed", "fetch")
    )


class Checkpointer:
    """The worker side of save_persistables / load_model / shrink / save_inference_model; one
    per PS runtime (so the barrier names of successive operations stay in step on every
    worker). `connection(api)` gives the started worker's client and communicator."""

    def __init__(self, role: RoleMakerBase, plan: PsPlan, connection: Connection) -> None:
        self._role = role
        self._plan = plan
        self._connection = connection
        self._calls = itertools.count()

    def _meet(self, client: PsClient, what: str, n: int, timeout: float) -> None:
        role = self._role
        api = _CALL_OF_BARRIER.get(what.split("_")[0], what)
        meet(client, f"__{what}_{n}__", role.worker_num(), role.worker_index(), timeout, api)

    def _begin(self, api: str, what: str, timeout: float) -> tuple[PsClient, int]:
        """Every worker's start of a collective job operation: flushes its gradients and meets
        the others at `<what>_begin`, so the servers hold every step each worker ran.
        (client, this operation's number for its `<what>_end` barrier)."""
        client, communicator = self._connection(api)
        n = next(self._calls)
        communicator.flush()
        self._meet(client, f"{what}_begin", n, timeout)
        return client, n

    def _flush_for_save(self, api: str, dirname: str) -> tuple[PsClient, bool]:
        """A save's start on any worker: refuses a path that is a file (naming it), flushes
        this worker's gradients; (client, whether this worker is the one that saves)."""
        check_directory(dirname, f"fleet.{api}")
        client, communicator = self._connection(api)
        communicator.flush()
        return client, self._role.worker_index() == 0

    def save_persistables(self, dirname: str, program: Any, mode: int = 0) -> None:
        """The first worker saves every table and its worker-local persistables into `dirname`;
        another worker's call flushes its gradients and returns (see the module docstring)."""
        if mode not in SAVE_MODES:
            raise InvalidArgument(
                f"fleet.save_persistables: mode must be 0 (base), 1 (delta) "
                f"or 2 (values), got {mode!r}"
            )
        dirname = os.fspath(dirname)
        client, saves = self._flush_for_save("save_persistables", dirname)
        if not saves:
            return
        os.makedirs(dirname, exist_ok=True)
        rows = client.save(dirname, delta=(mode == 1), values_only=(mode == 2))
        self._save_worker_vars(program, dirname)
        logger.info("saved %s checkpoint into %s: %d rows", SAVE_MODES[mode], dirname, rows)

    def _save_worker_vars(self, program: Any, dirname: str) -> None:
        scope = global_scope()
        arrays = {}
        for name in worker_local_vars(self._plan, program):
            var = scope.find_var(name)
            if var is not None and var.is_initialized():
                arrays[name] = np.array(var.get_tensor().numpy(), copy=True)
        path = os.path.join(dirname, WORKER_FILE)
        tmp = f"{path}.tmp-{os.getpid()}.npz"
        try:
            np.savez(tmp, **arrays)
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError as e:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise InvalidArgument(f"fleet.save_persistables: cannot write {path}: {e}") from None

    def load_model(self, dirname: str, program: Any, mode: int = 0, timeout: float = 600.0) -> None:
        """mode 0: worker 0 loads every server table (base, then deltas), then every worker its
        worker-local persistables and the fresh dense values; mode 1: only the worker-local
        persistables (for a job whose servers restored the tables in init_server(dirname))."""
        if mode not in (0, 1):
            raise InvalidArgument(
                f"fleet.load_model: mode must be 0 (tables and worker "
                f"variables) or 1 (worker variables only), got {mode!r}"
            )
        dirname = os.fspath(dirname)
        client, n = self._begin("load_model", "load", timeout)
        try:
            if mode == 0 and self._role.worker_index() == 0:
                rows = client.load(dirname)
                logger.info("loaded checkpoint %s: %d rows", dirname, rows)
        finally:
            self._meet(client, "load_end", n, timeout)
        load_worker_vars(self._plan, program, dirname)
        # The dense parameters the servers now hold.
        _, communicator = self._connection("load_model")
        communicator.flush()

    def shrink(self, threshold: int, timeout: float = 600.0) -> int:
        """Every worker calls it; worker 0 drops, in every sparse table, the rows not created or
        updated in the last `threshold` save cycles (a save of the table ends a cycle: with one
        save a day, Paddle's delete_after_unseen_days). Returns the rows dropped (on worker 0;
        0 on the others)."""
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
            raise InvalidArgument(
                f"fleet.shrink: threshold must be an integer >= 0 (save "
                f"cycles a row may go unseen), got {threshold!r}"
            )
        client, n = self._begin("shrink", "shrink", timeout)
        dropped = 0
        try:
            if self._role.worker_index() == 0:
                for table in self._plan.sparse:
                    dropped += client.shrink(table.table_id, threshold)
                logger.info("shrink(threshold=%d): %d sparse rows dropped", threshold, dropped)
        finally:
            self._meet(client, "shrink_end", n, timeout)
        return dropped

    def save_inference_model(
        self, dirname: str, feeded: Sequence[str], targets: Sequence[str], program: Any
    ) -> None:
        """The first worker exports (fleet/ps/inference.py) after flushing its gradients;
        another worker's call flushes its gradients and returns."""
        dirname = os.fspath(dirname)
        client, saves = self._flush_for_save("save_inference_model", dirname)
        if saves:
            inference.export(self._plan, client, dirname, feeded, targets, program)


def load_worker_vars(
    plan: PsPlan, program: Any, dirname: str, scope: Optional[Any] = None
) -> list[str]:
    """Sets this worker's local persistables from `dirname`'s worker file (when the save wrote
    one); returns the names set. A variable of another shape is refused, naming it."""
    path = os.path.join(dirname, WORKER_FILE)
    if not os.path.exists(path):
        return []
    scope = scope if scope is not None else global_scope()
    wanted = set(worker_local_vars(plan, program))
    done = []
    with np.load(path) as saved:
        for name in saved.files:
            if name not in wanted:
                continue
            var = scope.find_var(name)
            if var is None or not var.is_initialized():
                continue
            tensor = var.get_tensor()
            current = tensor.numpy()
            value = saved[name]
            if value.shape != current.shape:
                raise InvalidArgument(
                    f"{path}: '{name}' has shape {value.shape}, the program's has {current.shape}"
                )
            tensor.set(value.astype(current.dtype, copy=False))
            done.append(name)
    return done


__all__ = [
    "Checkpointer",
    "SAVE_MODES",
    "WORKER_FILE",
    "load_worker_vars",
    "meet",
    "name_calls",
    "worker_local_vars",
]
