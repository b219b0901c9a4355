"""DistributeTranspilerConfig and the dispatchers that place whole variables on servers
(fluid.transpiler.RoundRobin / HashName)."""

from __future__ import annotations

import zlib
from typing import Any, Sequence

from fleet.errors import InvalidArgument

MODES = ("pserver", "nccl2", "collective")


class PSDispatcher:
    """Picks a server endpoint for each variable given to dispatch()."""

    def __init__(self, pserver_endpoints: Sequence[str]) -> None:
        self._eps = list(pserver_endpoints)
        if not self._eps:
            raise InvalidArgument(f"{type(self).__name__}: no pserver endpoints")
        self._step = 0

    @property
    def eps(self) -> list[str]:
        return list(self._eps)

    def reset(self) -> None:
        self._step = 0

    def dispatch(self, varlist: Sequence[Any]) -> list[str]:
        raise NotImplementedError


class RoundRobin(PSDispatcher):
    """Variable i on endpoint i mod servers, continuing across dispatch() calls until reset()."""

    def dispatch(self, varlist: Sequence[Any]) -> list[str]:
        out = []
        for _ in varlist:
            out.append(self._eps[self._step % len(self._eps)])
            self._step += 1
        return out


class HashName(PSDispatcher):
    """A variable on the endpoint its name hashes to. The hash is CRC-32 of the name, the same in
    every process (Paddle's Python hash() is salted per process, so its trainers and servers
    could disagree)."""

    def dispatch(self, varlist: Sequence[Any]) -> list[str]:
        return [
            self._eps[zlib.crc32(getattr(v, "name", str(v)).encode()) % len(self._eps)]
            for v in varlist
        ]


class DistributeTranspilerConfig:
    """What transpile() does. Fleet acts on: slice_var_up, split_method, min_block_size (dense
    placement), mode, sync_mode (None: transpile()'s argument), half_async (with sync off),
    geo_sgd_mode and geo_sgd_need_push_nums. The other fields are accepted with no effect."""

    slice_var_up = True
    split_method: type = RoundRobin
    min_block_size = 8192
    mode = "pserver"
    sync_mode: bool | None = None
    runtime_split_send_recv = False
    geo_sgd_mode = False
    geo_sgd_need_push_nums = 100
    wait_port = True
    print_log = False
    enable_dc_asgd = False
    completely_not_async = False
    half_async = False
    collective_mode: str | None = None
    nccl_comm_num = 1
    use_hierarchical_allreduce = False
    hierarchical_allreduce_inter_nranks = 0

    def __setattr__(self, name: str, value: Any) -> None:
        if not hasattr(type(self), name):
            raise InvalidArgument(f"DistributeTranspilerConfig has no field '{name}'")
        object.__setattr__(self, name, value)

    def check(self) -> None:
        """InvalidArgument naming the first field with a value transpile() cannot use."""
        if self.mode not in MODES:
            raise InvalidArgument(
                f"DistributeTranspilerConfig.mode must be one of {MODES}, got {self.mode!r}"
            )
        method = self.split_method
        if not (isinstance(method, type) and issubclass(method, PSDispatcher)):
            raise InvalidArgument(
                "DistributeTranspilerConfig.split_method must be fleet.transpiler.RoundRobin or "
                f"HashName (the class), got {method!r}"
            )
        size = self.min_block_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise InvalidArgument(
                f"DistributeTranspilerConfig.min_block_size must be an integer >= 1, got {size!r}"
            )
        pushes = self.geo_sgd_need_push_nums
        if self.geo_sgd_mode and (not isinstance(pushes, int) or pushes < 1):
            raise InvalidArgument(
                "DistributeTranspilerConfig.geo_sgd_need_push_nums must be an integer >= 1, "
                f"got {pushes!r}"
            )


__all__ = ["DistributeTranspilerConfig", "HashName", "PSDispatcher", "RoundRobin"]
