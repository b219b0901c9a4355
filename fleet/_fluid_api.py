"""fluid's top-level functions that are not in `fleet.layers`, for ported scripts
(`import fleet as fluid`): the 1.8 forms `fluid.data` and `fluid.embedding`, and the calls Paddle
itself deprecated as no-ops (`memory_optimize`, `release_memory`), accepted with any arguments and
announced once per process (logger "fleet") as doing nothing."""

from __future__ import annotations

import logging
from typing import Any, Sequence

from fleet import layers
from fleet.framework import Variable

logger = logging.getLogger("fleet")
_said: set[str] = set()  # the no-op notices this process has logged (each once)


def data(name: str, shape: Sequence[Any], dtype: Any = "float32", lod_level: int = 0) -> Variable:
    """fluid.data: a fed variable whose shape is used as given (None or -1: any size); unlike
    fluid.layers.data no batch dimension is added."""
    return layers.static_data(name, shape, dtype, lod_level)


def embedding(
    input: Variable,
    size: Sequence[int],
    is_sparse: bool = False,
    is_distributed: bool = False,
    padding_idx: int | None = None,
    param_attr: Any = None,
    dtype: Any = "float32",
) -> Variable:
    """fluid.embedding (1.8): ids of any shape [d0, ..., dk] give rows [d0, ..., dk, dim]; a
    trailing 1 is kept (fluid.layers.embedding drops it)."""
    out = layers.embedding(input, size, is_sparse, is_distributed, padding_idx, param_attr, dtype)
    if len(input.shape) >= 2 and input.shape[-1] == 1:
        out = layers.reshape(out, [d if d >= 0 else -1 for d in input.shape] + [int(size[1])])
    return out


def _notice(name: str) -> None:
    if name not in _said:
        _said.add(name)
        logger.warning(
            "fleet.%s() does nothing: deprecated in Paddle as well; Fleet's executor already "
            "frees what a run no longer needs",
            name,
        )


def memory_optimize(input_program: Any = None, *args: Any, **kwargs: Any) -> None:
    """fluid.memory_optimize (deprecated by Paddle 1.6): accepted and ignored."""
    _notice("memory_optimize")


def release_memory(input_program: Any = None, *args: Any, **kwargs: Any) -> None:
    """fluid.release_memory (deprecated by Paddle): accepted and ignored."""
    _notice("release_memory")


__all__ = ["data", "embedding", "memory_optimize", "release_memory"]
