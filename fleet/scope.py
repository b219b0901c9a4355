"""The process's global scope and default distributed resources: the state the fluid API makes
implicit. A leaf module (it imports only the compiled core), so that the executor, the engines
and the facade all import it at the top and share one of each per process.

* `global_scope()` is where `Executor.run` and the checkpoint and export functions read and
  write variables when no scope is given; `scope_guard(scope)` switches it for a `with` block.
* `default_resources()` is the `_core.RuntimeResources` every `fleet.Executor` made without
  `resources=` hands its kernels and step hooks: the `fleet` facade attaches its PS
  communicator (at `init_worker`) and its collective group to this object.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from fleet import _core


class _Globals:
    """The one scope and resources object of the process (switched by scope_guard)."""

    scope = _core.Scope()
    resources = _core.RuntimeResources()


def global_scope() -> Any:
    """The scope used when none is given (a `_core.Scope`)."""
    return _Globals.scope


@contextlib.contextmanager
def scope_guard(scope: Any) -> Iterator[None]:
    """Makes `scope` the global scope inside the `with` block, restoring the previous one after."""
    saved, _Globals.scope = _Globals.scope, scope
    try:
        yield
    finally:
        _Globals.scope = saved


def default_resources() -> Any:
    """The distributed resources (`_core.RuntimeResources`) executors use by default."""
    return _Globals.resources


__all__ = ["default_resources", "global_scope", "scope_guard"]
