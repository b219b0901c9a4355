"""The process's global scope and default distributed resources: the state the fluid API makes
implicit. A leaf module (it imports only the compiled core), so that the executor, the engines
and the facade all import it at the top and share one of each per process.

* `global_scope()` is where `Executor.run` and the checkpoint and export functions read and
  write variables when no scope is given; `scope_guard(scope)` switches it for a `with` block.
* `default_resources()` is the `_core.RuntimeResources` every `fleet.Executor` made without
  `resources=` hands its kernels and step hooks: the `fleet` facade attaches its PS
  communicator (at `init_worker`) and its collective group to this object.
* run listeners: set-ups that wait for a program to have run, called by every `Executor.run`
  and dataset pass before and after it runs (e.g. `fleet.init_worker()` called before the
  startup program hands the dense start-up values to the servers once that program has run).
  One list per process, like the global scope (the fluid API makes the order of those calls
  free); a listener removes itself when its set-up is done or abandoned.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

from fleet import _core


class _Globals:
    """The one scope and resources object of the process (switched by scope_guard)."""

    scope = _core.Scope()
    resources = _core.RuntimeResources()
    run_listeners: list[Callable[[], None]] = []


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


def add_run_listener(listener: Callable[[], None]) -> None:
    """Calls `listener()` before and after every executor run of this process until it is
    removed (a listener may remove itself). An exception it raises fails that run."""
    _Globals.run_listeners.append(listener)


def remove_run_listener(listener: Callable[[], None]) -> None:
    if listener in _Globals.run_listeners:
        _Globals.run_listeners.remove(listener)


def notify_run_listeners() -> None:
    """Called by the executor around each run (a copy: listeners remove themselves)."""
    for listener in list(_Globals.run_listeners):
        listener()


__all__ = [
    "add_run_listener",
    "default_resources",
    "global_scope",
    "notify_run_listeners",
    "remove_run_listener",
    "scope_guard",
]
