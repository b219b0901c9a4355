"""Containers that tell their program when they change.

A Block's `ops` list and `vars` dict are edited by layers, optimizers and program passes
(distributed_optimizer removes, inserts and renames ops and variables). Every edit must bump the
program's `version`, which keys the executor's cache of prepared programs and the cached
ProgramDesc: a direct `block.ops.pop(i)` that did not would run a stale program. These
subclasses call `on_change()` after every mutating method.
"""

from __future__ import annotations

from typing import Any, Callable


class TrackedList(list):
    def __init__(self, on_change: Callable[[], None], items: Any = ()) -> None:
        super().__init__(items)
        self._on_change = on_change


class TrackedDict(dict):
    def __init__(self, on_change: Callable[[], None], items: Any = ()) -> None:
        super().__init__(items)
        self._on_change = on_change


def _tracking(cls: type, names: tuple[str, ...]) -> None:
    for name in names:
        base = getattr(cls.__mro__[1], name)

        def method(self: Any, *args: Any, __base: Any = base, **kwargs: Any) -> Any:
            result = __base(self, *args, **kwargs)
            self._on_change()
            return result

        method.__name__ = name
        setattr(cls, name, method)


_tracking(
    TrackedList,
    (
        "append",
        "extend",
        "insert",
        "pop",
        "remove",
        "clear",
        "sort",
        "reverse",
        "__setitem__",
        "__delitem__",
        "__iadd__",
        "__imul__",
    ),
)
_tracking(
    TrackedDict,
    ("__setitem__", "__delitem__", "pop", "popitem", "clear", "update", "setdefault", "__ior__"),
)

__all__ = ["TrackedDict", "TrackedList"]
