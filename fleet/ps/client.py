"""The worker side of the parameter server: ``PsClient``.

Pulls and pushes take NumPy arrays. The ``*_async`` forms return a ``Future`` at once (its
``wait()`` returns the pulled array, or None for a push), so that a communicator can overlap
calls; the plain forms wait. Every call is bounded by the client's timeouts: an unreachable or
dead server raises ``fleet.errors.Unavailable`` or ``fleet.errors.Timeout`` naming its endpoint.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from fleet import _core
from fleet.errors import InvalidArgument, Unavailable
from fleet.proto import ps_pb2

Future = _core.ps.Future


def _keys(keys: np.ndarray) -> np.ndarray:
    array = np.asarray(keys)
    if not np.issubdtype(array.dtype, np.integer):
        raise InvalidArgument(f"keys must be integers, got dtype {array.dtype}")
    # Unsigned keys keep their bits: uint64 ids map onto the whole int64 range.
    return np.ascontiguousarray(array.reshape(-1)).astype(np.int64, copy=False)


def _floats(values: np.ndarray, what: str) -> np.ndarray:
    array = np.ascontiguousarray(values, dtype=np.float32)
    if array.dtype != np.float32:
        raise InvalidArgument(f"{what} must be float32")
    return array


class PsClient:
    """A connection to every parameter server. Thread-safe.

    Args:
        endpoints: ``host:port`` of server 0, 1, ... (in server-index order); a malformed one
            raises InvalidArgument at once.
        connect_timeout: seconds to wait for every server at construction.
        rpc_timeout: deadline in seconds of each pull, push, stats and stop RPC.
        admin_timeout: deadline in seconds of save, load and shrink.
        max_keys_per_request: larger sparse requests are split into pieces of this many keys.
        job_id: this process's job identity (``fleet.role_maker``'s ``job_id``), sent with
            every call; servers of another job refuse the calls, naming both jobs ("" names
            none, and any server answers).
        server_restarts: take a server restarted under the client when it reloaded a checkpoint
            (the job's ``a_sync_configs["server_restarts"]``): calls wait for a server that is
            down and resend a call its death cut, within ``rpc_timeout``, and a line on stderr
            says which checkpoint the server came back with. Without it (and for a server that
            came back empty) every call to a restarted server raises Unavailable naming it.
        local_host: this process's host as the endpoints write it (the role maker's hostname).
            A server whose endpoint has this host is called over its Unix-domain socket when it
            listens on one (``start_server(local_transport=True)``), else over TCP after one
            line on stderr; ``target(i)`` says which. "" (default): TCP to every server.
        local_socket: try the Unix-domain socket of a server on ``local_host`` (default True).
        local_shared_memory: the floats of dense pushes, push-pulls and pulls to a server on
            ``local_host`` go through a memory segment shared with it, the calls themselves over
            their channel as before (csrc/ps/detail/shm_segment.h); when the server cannot map
            it, one line on stderr says so and the floats go on the wire. ``shared_memory(i)``
            says which. Not with ``server_restarts``.

    Timeouts must be finite and positive, ``max_keys_per_request`` at least 1 (InvalidArgument
    otherwise). After ``close()``, or after ``stop_servers()``, every call raises Unavailable.
    """

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        connect_timeout: float = 10.0,
        rpc_timeout: float = 30.0,
        admin_timeout: float = 600.0,
        max_keys_per_request: int = 32768,
        job_id: str = "",
        server_restarts: bool = False,
        local_host: str = "",
        local_socket: bool = True,
        local_shared_memory: bool = False,
    ) -> None:
        if isinstance(endpoints, str):
            raise InvalidArgument(
                f"endpoints must be a list of host:port, got the string {endpoints!r}"
            )
        self._core_client: Optional[_core.ps.Client] = _core.ps.Client(
            list(endpoints),
            float(connect_timeout),
            float(rpc_timeout),
            float(admin_timeout),
            int(max_keys_per_request),
            str(job_id),
            bool(server_restarts),
            str(local_host),
            bool(local_socket),
            bool(local_shared_memory),
        )
        self._endpoints = list(endpoints)
        self._tables: Dict[int, ps_pb2.TableConfig] = {}

    @property
    def _core(self) -> "_core.ps.Client":
        if self._core_client is None:
            raise Unavailable(f"PsClient of {','.join(self._endpoints)} is closed")
        return self._core_client

    @property
    def core_client(self) -> "_core.ps.Client":
        """The compiled client, for the communicator that calls the servers through it;
        Unavailable once closed."""
        return self._core

    @property
    def endpoints(self) -> List[str]:
        return list(self._endpoints)

    def target(self, server: int) -> str:
        """Where the calls to ``server`` go: its endpoint, or its Unix-domain socket
        ("unix-abstract:fleet-ps/<endpoint>") when it is on this host (``local_host``)."""
        return self._core.target(server)

    def shared_memory(self, server: int) -> bool:
        """Whether the dense floats and sparse rows to ``server`` go through memory shared with it
        (``local_shared_memory``)."""
        return bool(self._core.shared_memory(server))

    def table_config(self, table_id: int) -> ps_pb2.TableConfig:
        """The config of a table, as the servers reported it (NotFound when absent)."""
        if table_id not in self._tables:
            raw = self._core.table_config(table_id)
            self._tables[table_id] = ps_pb2.TableConfig.FromString(raw)
        return self._tables[table_id]

    # Sparse tables ---------------------------------------------------------------------------

    def pull_sparse_async(
        self, table_id: int, keys: np.ndarray, out: Optional[np.ndarray] = None
    ) -> Future:
        """Starts pulling the rows of ``keys`` (any integer array, flattened) into ``out``
        (float32, ``len(keys) * dim`` elements; a new ``(len(keys), dim)`` array by default)."""
        keys = _keys(keys)
        if out is None:
            out = np.empty((keys.size, self.table_config(table_id).dim), dtype=np.float32)
        return self._core.pull_sparse_async(table_id, keys, out)

    def pull_sparse(
        self, table_id: int, keys: np.ndarray, out: Optional[np.ndarray] = None
    ) -> np.ndarray:
        """The rows of ``keys``, shape ``(len(keys), dim)``; missing rows are created."""
        return self.pull_sparse_async(table_id, keys, out).wait()

    def push_sparse_async(
        self, table_id: int, keys: np.ndarray, grads: np.ndarray, *, delta: bool = False
    ) -> Future:
        """Starts pushing gradients (or, with ``delta``, GEO deltas added as they are) of
        ``keys``; gradients of repeated keys are summed. The arrays may be reused at once."""
        return self._core.push_sparse_async(table_id, _keys(keys), _floats(grads, "grads"), delta)

    def push_sparse(
        self, table_id: int, keys: np.ndarray, grads: np.ndarray, *, delta: bool = False
    ) -> None:
        self.push_sparse_async(table_id, keys, grads, delta=delta).wait()

    def push_pull_sparse_async(
        self,
        table_id: int,
        keys: np.ndarray,
        grads: np.ndarray,
        out: Optional[np.ndarray] = None,
        *,
        delta: bool = False,
    ) -> Future:
        """Starts pushing gradients (or, with ``delta``, GEO deltas) of ``keys`` and bringing
        back, into ``out`` (float32, ``len(keys) * dim`` elements; a new ``(len(keys), dim)``
        array by default), each row's value right after the push: one round trip per request
        instead of a push and a pull. ``keys`` and ``grads`` may be reused at once."""
        keys = _keys(keys)
        if out is None:
            out = np.empty((keys.size, self.table_config(table_id).dim), dtype=np.float32)
        return self._core.push_pull_sparse_async(
            table_id, keys, _floats(grads, "grads"), out, delta
        )

    def push_pull_sparse(
        self,
        table_id: int,
        keys: np.ndarray,
        grads: np.ndarray,
        out: Optional[np.ndarray] = None,
        *,
        delta: bool = False,
    ) -> np.ndarray:
        return self.push_pull_sparse_async(table_id, keys, grads, out, delta=delta).wait()

    # Dense tables ----------------------------------------------------------------------------

    def pull_dense_async(self, table_id: int, out: Optional[np.ndarray] = None) -> Future:
        """Starts pulling a whole dense table into ``out`` (float32, dim elements)."""
        if out is None:
            out = np.empty(self.table_config(table_id).dim, dtype=np.float32)
        return self._core.pull_dense_async(table_id, out)

    def pull_dense(self, table_id: int, out: Optional[np.ndarray] = None) -> np.ndarray:
        return self.pull_dense_async(table_id, out).wait()

    def push_dense_async(self, table_id: int, grads: np.ndarray, *, delta: bool = False) -> Future:
        return self._core.push_dense_async(table_id, _floats(grads, "grads").reshape(-1), delta)

    def push_dense(self, table_id: int, grads: np.ndarray, *, delta: bool = False) -> None:
        self.push_dense_async(table_id, grads, delta=delta).wait()

    def push_pull_dense_async(
        self, table_id: int, grads: np.ndarray, out: Optional[np.ndarray] = None
    ) -> Future:
        """Starts pushing gradients of a whole dense table and bringing back, into ``out``
        (float32, dim elements), the values each server holds right after applying them: one
        round trip per server instead of a push and a pull. ``grads`` may be reused at once."""
        if out is None:
            out = np.empty(self.table_config(table_id).dim, dtype=np.float32)
        return self._core.push_pull_dense_async(table_id, _floats(grads, "grads").reshape(-1), out)

    def push_pull_dense(
        self, table_id: int, grads: np.ndarray, out: Optional[np.ndarray] = None
    ) -> np.ndarray:
        return self.push_pull_dense_async(table_id, grads, out).wait()

    # Coordination and administration ---------------------------------------------------------

    def barrier(self, name: str, num_workers: int, worker_id: int, timeout: float = 60.0) -> None:
        """Waits until ``num_workers`` workers reached barrier ``name``; Timeout otherwise.
        A ``worker_id`` outside ``[0, num_workers)``, or one already waiting at the barrier,
        raises InvalidArgument and is not counted."""
        self._core.barrier_async(name, num_workers, worker_id, float(timeout)).wait()

    def save(
        self,
        dirname: str,
        table_id: Optional[int] = None,
        *,
        delta: bool = False,
        end_save_cycle: bool = True,
        values_only: bool = False,
    ) -> int:
        """Saves one table (all when None) on every server into the checkpoint directory
        ``dirname``; a delta save holds only the rows changed since the previous save and is
        loaded after the saves before it in the same directory. Returns the rows written.

        The save becomes visible (its manifest committed) only when every server wrote its
        parts; a failure raises an error naming the server and the directory and leaves the
        previous checkpoint there loadable. The format is described in ``csrc/ps/checkpoint.h``.

        ``end_save_cycle=False`` (an export of the values, as save_inference_model makes): the
        save does not count as one, so the next delta save still holds every row changed since
        the last save, and shrink's count of saves is unchanged. ``values_only``: sparse rows
        without their update-rule state (a load starts it afresh); it starts a chain like a
        base save.
        """
        return self._core.save(os.fspath(dirname), table_id, delta, end_save_cycle, values_only)

    def load(self, dirname: str, table_id: Optional[int] = None) -> int:
        """Loads what ``save`` wrote, on any number of servers; returns the rows loaded. A
        checkpoint without a committed manifest, with a missing or damaged part, or with a
        table of another type or dim is refused with an error naming it; nothing is loaded."""
        return self._core.load(os.fspath(dirname), table_id)

    def shrink(self, table_id: int, max_unseen_saves: int) -> int:
        """Drops sparse rows untouched for more than ``max_unseen_saves`` saves."""
        return self._core.shrink(table_id, max_unseen_saves)

    def stats(self) -> List[List[Any]]:
        """Per server, per table, a ``_core.ps.TableStats``: ``table_id``, ``type``, ``rows``,
        ``bytes``, ``filtered_keys``, and ``ssd``, None unless the table has storage "ssd", else
        a ``_core.ps.SsdTierStats``: ``rows_in_memory``, ``rows_on_disk``, ``memory_hits``,
        ``disk_reads``, ``hit_rate`` (of the rows a request found, the share found in memory),
        ``bytes_read``, ``bytes_written``, ``evictions``."""
        return self._core.stats()

    def heartbeat(self) -> None:
        self._core.heartbeat()

    def stop_servers(self) -> None:
        """Asks every server to stop; each finishes the RPCs in flight first. Later calls
        through this client raise Unavailable."""
        self._core.stop_servers()

    def close(self) -> None:
        """Waits for the calls in flight, then drops the connections. Idempotent; later calls
        raise Unavailable."""
        if self._core_client is not None:
            self._core_client.close()
            self._core_client = None

    def __enter__(self) -> "PsClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["PsClient", "Future"]
