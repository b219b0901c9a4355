"""Worker utilities (`fleet.util`): all_reduce, all_gather and barrier among the workers of a job,
carried by a Gloo group over TCP.

The group is created on first use, not by fleet.init(): a job that never calls a utility never
needs a rendezvous store. Creating it is a rendezvous of every worker: each must call a utility
(or fleet.barrier_worker()) within the rendezvous timeout (FLEET_GLOO_TIMEOUT_S, 120 s by
default), or the others fail with fleet.errors.Timeout naming the ranks that did not come.
After that, every worker must issue the same calls in the same order (see
csrc/collective/backend.h). Each call checks that first: a worker that calls something else
(another operation, dtype, shape or mode) makes every worker raise fleet.errors.InvalidArgument
naming it. Each call is bounded by its `timeout_s`, else the group's collective timeout
(GlooConfig.collective_timeout_s, from FLEET_GLOO_COLLECTIVE_TIMEOUT_S, 1800 s by default); on
expiry fleet.errors.Timeout names the workers that did not arrive, and a worker that exited
without calling is named in fleet.errors.Unavailable.

Internal: scripts use it as fleet.util.
"""

from __future__ import annotations

import pickle
from typing import Any, Callable, Optional

import numpy as np

from fleet import _core
from fleet._endpoints import parse_endpoint
from fleet.errors import InvalidArgument, Timeout
from fleet.role_maker import GLOO_STORE_ENDPOINT, GLOO_STORE_PATH, RoleMakerBase

_MODES = ("sum", "max", "min")
_REDUCIBLE = (np.float32, np.float64, np.int32, np.int64)


class WorkerGroup:
    """The workers' Gloo group, with the store (and, on worker 0, the store server) that it was
    built from. Owned by one UtilBase; closing it drops the connections."""

    def __init__(self, role: RoleMakerBase) -> None:
        cfg = role.gloo
        rank, size = role.worker_index(), role.worker_num()
        self.server = None
        if size == 1:
            self.store = _core.MemoryStore()
        elif cfg.store_path:
            self.store = _core.FileStore(cfg.store_path)
        elif cfg.store_endpoint:
            self.store = self._tcp_store(cfg.store_endpoint, rank, size, cfg.timeout_s, role.job_id)
        else:
            raise InvalidArgument(
                f"the worker group ({size} workers) needs a rendezvous store: set "
                f"{GLOO_STORE_ENDPOINT}=ip:port (a free port on worker 0's machine; fleetrun sets "
                f"it) or {GLOO_STORE_PATH}=<directory shared by all workers>; neither is set "
                f"(role: {role!r})"
            )
        # Each rank's endpoint, so that a rendezvous timeout names where the missing ranks run.
        self.group = _core.GlooGroup.connect(
            self.store,
            rank,
            size,
            cfg.hostname,
            "worker",
            cfg.timeout_s,
            cfg.collective_timeout_s,
            rank_addresses=role.worker_endpoints(),
        )

    def _tcp_store(self, endpoint: str, rank: int, size: int, timeout_s: float, job_id: str) -> Any:
        # Store and clients carry the job identity: a rank of another job given the same store
        # port is refused at its first call, naming both jobs (csrc/collective/tcp_store.h).
        host, port = parse_endpoint(endpoint, GLOO_STORE_ENDPOINT)
        if rank == 0:
            self.server = _core.TcpStoreServer(host, port, job_id=job_id)
        try:
            return _core.TcpStore(host, port, connect_timeout_s=timeout_s, job_id=job_id)
        except Timeout as e:
            raise Timeout(
                f"rendezvous of group 'worker' timed out after {timeout_s:g} s: rank(s) "
                f"[0] of {size} did not join (worker 0 serves the store at {endpoint} "
                f"and never started it; this is rank {rank}): {e}"
            ) from None

    def close(self) -> None:
        self.group = None
        self.store = None
        if self.server is not None:
            self.server.close()
            self.server = None


class UtilBase:
    """`fleet.util`: collective helpers among workers. `role_source` returns the current role
    (fleet.init must have run); the group follows the role and is rebuilt after a new init."""

    def __init__(self, role_source: Callable[[], RoleMakerBase]) -> None:
        self._role_source = role_source
        self._group: Optional[WorkerGroup] = None
        self._group_role: Optional[RoleMakerBase] = None

    def all_reduce(
        self,
        input: Any,
        mode: str = "sum",
        comm_world: str = "worker",
        timeout_s: Optional[float] = None,
    ) -> np.ndarray:
        """Element-wise sum / max / min of `input` (an array or anything np.asarray takes;
        float32, float64, int32 or int64) over all workers. Returns a new array of the input's
        shape and dtype on every worker. `timeout_s` bounds this call (default: the group's)."""
        if mode not in _MODES:
            raise InvalidArgument(f"all_reduce: mode {mode!r} is not one of {_MODES}")
        array = np.asarray(input)
        if array.dtype.type not in _REDUCIBLE:
            raise InvalidArgument(
                f"all_reduce: dtype {array.dtype} is not supported (use "
                "float32, float64, int32 or int64)"
            )
        group = self._worker_group(comm_world)
        return group.group.all_reduce(array, mode, timeout_s)

    def all_gather(
        self, input: Any, comm_world: str = "worker", timeout_s: Optional[float] = None
    ) -> list:
        """Every worker's `input`, as a list indexed by worker. NumPy arrays travel as raw bytes
        (any dtype; shapes may differ between workers); other objects are pickled."""
        group, timeout = self._worker_group(comm_world).group, timeout_s
        # Every worker first learns what the others hold, so all take the same path below.
        if isinstance(input, np.ndarray) and not input.dtype.hasobject:
            header: tuple = ("ndarray", input.dtype.str, input.shape)
        else:
            header = ("object",)
        headers = [pickle.loads(b) for b in group.all_gather_bytes(pickle.dumps(header), timeout)]
        if headers[0][0] == "ndarray" and all(h == headers[0] for h in headers):
            return list(group.all_gather(input, timeout))
        return [
            pickle.loads(b)
            for b in group.all_gather_bytes(
                pickle.dumps(input, protocol=pickle.HIGHEST_PROTOCOL), timeout
            )
        ]

    def all_to_all_bytes(
        self, payloads: list, comm_world: str = "worker", timeout_s: Optional[float] = None
    ) -> list:
        """Sends payloads[j] (bytes) to worker j; returns what each worker sent to this one
        (result[j] from worker j). Built on all_gather, so every worker receives every payload:
        fine for occasional exchanges such as InMemoryDataset.global_shuffle, not for hot loops."""
        group, timeout = self._worker_group(comm_world).group, timeout_s
        size, rank = group.size, group.rank
        if len(payloads) != size:
            raise InvalidArgument(f"all_to_all_bytes: {len(payloads)} payloads for {size} workers")
        gathered = group.all_gather_bytes(
            pickle.dumps([bytes(p) for p in payloads], protocol=pickle.HIGHEST_PROTOCOL), timeout
        )
        return [pickle.loads(b)[rank] for b in gathered]

    def barrier(self, comm_world: str = "worker", timeout_s: Optional[float] = None) -> None:
        """Returns once every worker has called barrier()."""
        self._worker_group(comm_world).group.barrier(timeout_s)

    def get_file_shard(self, files: list[str]) -> list[str]:
        """This worker's share of `files` (PaddleRec's split, no communication): contiguous
        shares in worker order, the first len(files) % workers of them one file longer; a
        worker may get none when there are fewer files than workers."""
        if not isinstance(files, (list, tuple)) or not all(isinstance(f, str) for f in files):
            raise InvalidArgument(
                f"fleet.util.get_file_shard takes a list of file names, got {files!r}"
            )
        role = self._role_source()
        workers, index = role.worker_num(), role.worker_index()
        size, longer = divmod(len(files), workers)
        begin = index * size + min(index, longer)
        return list(files[begin : begin + size + (1 if index < longer else 0)])

    def worker_group(self) -> WorkerGroup:
        """The workers' group and its store, made on first use (a rendezvous of all workers);
        the collective runtime builds its own group over the same store."""
        return self._worker_group("worker")

    def _worker_group(self, comm_world: str) -> WorkerGroup:
        if comm_world != "worker":
            raise InvalidArgument(
                f"comm_world={comm_world!r}: fleet.util collectives run among "
                "workers only (comm_world='worker')"
            )
        role = self._role_source()
        if not role.is_worker():
            raise InvalidArgument(
                f"fleet.util collectives run among workers; this process is "
                f"server {role.server_index()}"
            )
        if self._group is None or self._group_role is not role:
            self.close()
            self._group = WorkerGroup(role)
            self._group_role = role
        return self._group

    def close(self) -> None:
        """Drops the worker group (and stops the store server on worker 0)."""
        if self._group is not None:
            self._group.close()
        self._group = None
        self._group_role = None
