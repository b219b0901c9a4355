"""The collective runtime of one process: its collective group (a Gloo group on CPU) put into the
facade's RuntimeResources, where the c_* ops of every fleet.Executor find it, and the step hooks
the program pass's plan asks for (gradient merge).

The facade binds the runtime to the role at fleet.init(is_collective=True) and connects it when
a collective job first needs the group: its first distributed minimize, or fleet.init_worker().
Connecting is a rendezvous of every rank, which is why fleet.init() itself never blocks (a rank
that never calls a collective is then named by fleet.util's own rendezvous). The group goes
through the same store as fleet.util (worker 0 serves it; fleetrun sets
FLEET_GLOO_STORE_ENDPOINT), but is a group of its own named "collective", so that fleet.util
calls and program collectives never interleave.

Each rank also listens on its job endpoint (PADDLE_CURRENT_ENDPOINT) without ever accepting: when a
collective fails, the survivors probe those endpoints to name the rank that died.

Internal: the facade owns it; scripts get the group through fleet.init(is_collective=True)
and a distributed minimize (or fleet.init_worker()).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from fleet import _core
from fleet._endpoints import parse_endpoint
from fleet.collective.program_pass import GradientMergePlan
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

    def ensure_group(
        self, role: RoleMakerBase, resources: Any, worker_store: Callable[[], Any]
    ) -> Any:
        """The group of `role`, made (a rendezvous of all ranks, bounded by the role's Gloo
        timeout) and attached to `resources` on the first call for that role. `worker_store`
        returns the store of the workers' fleet.util group (made on first use), which the
        group meets through when the job has more than one rank."""
        if self._group is not None and self._role is role:
            return self._group
        self.close()
        rank, size = role.worker_index(), role.worker_num()
        endpoints = role.worker_endpoints()
        self._listener = _listen(endpoints, rank)
        store = _core.MemoryStore() if size == 1 else worker_store()
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
        self._resources = resources
        self._group.attach(self._resources)
        return self._group

    def add_gradient_merge(self, plan: GradientMergePlan) -> Any:
        """Registers the step hook that runs the plan's apply block every k_steps (see
        csrc/distributed/gradient_merge.h), replacing the hook of an earlier program: one
        gradient-merge program trains per process (its counter would drive both otherwise).
        ensure_group must have run."""
        if self._group is None:
            raise Unavailable(
                "gradient merge needs the collective group: connect it first "
                "(fleet.init(is_collective=True), then minimize or fleet.init_worker())"
            )
        for old in self._hooks:
            old.detach(self._resources)
        hook = _core.GradientMergeHook(
            plan.program_desc, plan.apply_block, plan.step_var, plan.k_steps, self._group
        )
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
