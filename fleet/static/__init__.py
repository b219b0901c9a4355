"""paddle.static for Fleet programs: `data`, `auc`, the programs, the executor and the save and
load functions a PaddleRec static model and its trainer call, under `import fleet as paddle`."""

from __future__ import annotations

from typing import Any, Sequence

from fleet import layers
from fleet.executor import CPUPlace, Executor, global_scope, scope_guard
from fleet.framework import (
    Program,
    Variable,
    default_main_program,
    default_startup_program,
    program_guard,
)
from fleet.ps.inference import load_inference_model
from fleet.static.io import load, save, save_inference_model


def data(name: str, shape: Sequence[Any], dtype: Any = "float32", lod_level: int = 0) -> Variable:
    """A fed variable; None or -1 in `shape` is a size known only when fed."""
    return layers.static_data(name, shape, dtype, lod_level)


def auc(
    input: Variable,
    label: Variable,
    curve: str = "ROC",
    num_thresholds: int = 2**12 - 1,
    topk: int = 1,
    slide_steps: int = 1,
):  # noqa: ANN201
    """(auc, batch_auc, [batch_stat_pos, batch_stat_neg, stat_pos, stat_neg]) as Paddle
    returns them; the global AUC accumulates over every batch since the statistics were last
    zeroed."""
    return layers.auc(input, label, curve, num_thresholds, topk, slide_steps)


__all__ = [
    "CPUPlace",
    "Executor",
    "Program",
    "auc",
    "data",
    "default_main_program",
    "default_startup_program",
    "global_scope",
    "load",
    "load_inference_model",
    "program_guard",
    "save",
    "save_inference_model",
    "scope_guard",
]
