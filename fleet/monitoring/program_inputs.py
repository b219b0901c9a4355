"""Which variables of a program a step is fed: what the step meter counts samples by."""

from __future__ import annotations

from typing import Any


def fed_variables(program: Any) -> list[str]:
    """The variables of `program`'s global block that its ops read and none writes, and that are
    not persistable (parameters and optimizer state are): the inputs a feed or a dataset fills
    each step, in the order ops first read them."""
    block = program.global_block()
    written = {name for op in block.ops for names in op.outputs.values() for name in names}
    fed: list[str] = []
    for op in block.ops:
        for names in op.inputs.values():
            for name in names:
                var = block.vars.get(name)
                if name in written or name in fed or var is None or var.persistable:
                    continue
                fed.append(name)
    return fed
