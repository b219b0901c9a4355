"""The collective runtime of one process: its collective group (a Gloo group on CPU) put into the
facade's RuntimeResources, where the c_* ops of every fleet.Executor find it, and the step hooks
the program pass asks for (gradient merge).

The group is made on first need (the first distributed minimize), not by fleet.init(), because
making it is a rendezvous of every rank: fleet.init() never blocks. It goes through the same store
as fleet.util (worker 0 serves it; fleetrun sets FLEET_GLOO_STORE_ENDPOINT), but is a group of its
own named "collective", so that fleet.util calls and program collectives never interleave.

Each rank also listens on its job endpoint (PADDLE_CURRENT_ENDPOINT) without ever accepting: when a
collective fails, the survivors probe those endpoints to name the rank that died.
"""

from __future__ import annotations

from typing import Any, Optional

from fleet import _core
from fleet.base.endpoints import parse_endpoint
from fleet.errors import Unavailable
from fleet.role_maker import RoleMakerBase

GROUP_NAME = "collective"


class CollectiveRuntime:
    """Owned by the fleet facade (one per process); everything below it is an object it holds."""

    def __init__(self) -> None:
        self._group: Optional[Any] = None
        self._role: Optional[RoleMakerBase] = None
        self._listener: Optional[Any] = None
        self._resources: Optional[Any] = None
        self._hooks: list[Any] = []

    @property
    def group(self) -> Optional[Any]:
        """The `_core.CollectiveGroup`, once made."""
        return self._group

    def ensure_group(self, fleet: Any) -> Any:
        """The group of the current role, made (a rendezvous of all ranks, bounded by the role's
        Gloo timeout) and attached to `fleet.runtime_resources` on first call."""
        role = fleet.role_maker
        if self._group is not None and self._role is role:
            return self._group
        self.close()
        rank, size = role.worker_index(), role.worker_num()
        endpoints = role.worker_endpoints()
        self._listener = _listen(endpoints, rank)
        if size == 1:
            store = _core.MemoryStore()
        else:
            store = fleet.util.worker_group().store
        cfg = role.gloo
        self._group = _core.CollectiveGroup.connect_gloo(
            store,
            rank,
            size,
            hostname=cfg.hostname,
            name=GROUP_NAME,
            timeout_s=cfg.timeout_s,
            collective_timeout_s=cfg.collective_timeout_s,
            rank_endpoints=endpoints if self._listener is not None else [],
        )
        self._role = role
        self._resources = fleet.runtime_resources
        self._group.attach(self._resources)
        return self._group

    def add_gradient_merge(
        self, program_desc: bytes, apply_block: int, step_var: str, k_steps: int
    ) -> Any:
        """Registers the step hook that runs `apply_block` every k_steps (see
        csrc/distributed/gradient_merge.h), replacing the hook of an earlier program: one
        gradient-merge program trains per process (its counter would drive both otherwise).
        ensure_group must have run."""
        for old in self._hooks:
            old.detach(self._resources)
        hook = _core.GradientMergeHook(program_desc, apply_block, step_var, k_steps, self._group)
        hook.attach(self._resources)
        self._hooks = [hook]
        return hook

    def close(self) -> None:
        """Detaches the group and hooks from the resources and drops them."""
        if self._resources is not None:
            _core.detach_collective_group(self._resources)
        self._group = self._role = self._listener = self._resources = None
        self._hooks = []


def _listen(endpoints: list[str], rank: int) -> Optional[Any]:
    """A LivenessListener on this rank's endpoint, or None when the job has no endpoints or the
    port is taken (then failures name no rank, and nothing else changes)."""
    if not endpoints:
        return None
    host, port = parse_endpoint(endpoints[rank], "worker endpoint")
    try:
        return _core.LivenessListener(host, port)
    except Unavailable:
        return None


__all__ = ["CollectiveRuntime", "GROUP_NAME"]
