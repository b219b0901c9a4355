"""Learning-rate schedules as fluid builds them: a persistable global step counter, advanced by an
`increment` op at the start of every run of the main program, and an `lr_decay` op computing
the rate from it. The result is an ordinary variable to pass as an optimizer's learning_rate.

The counter is one per program (the first schedule creates it, the others reuse it); it counts
runs of the main program, starting at 0 (noam_decay: 1), and is saved with the persistables,
so a job restored from a checkpoint goes on with its schedule. Formulas: lr_schedule_ops.cc.
"""

from __future__ import annotations

from typing import Sequence

from fleet._dtypes import FLOAT32, INT64
from fleet.errors import InvalidArgument
from fleet.framework import Variable
from fleet.layers.helper import LayerHelper
from fleet.layers.tensor import create_global_var

LR_COUNTER_NAME = "@LR_DECAY_COUNTER@"


def _decay_step_counter(begin: int = 0) -> Variable:
    """The step as a float32 [1] variable: the program's counter (created at begin - 1 and
    incremented first thing in each run, so a run sees begin, begin + 1, ...), cast."""
    helper = LayerHelper("lr_step")
    block = helper.block
    if not block.has_var(LR_COUNTER_NAME):
        counter = create_global_var([1], begin - 1, INT64, persistable=True, name=LR_COUNTER_NAME)
        block._prepend_op(
            "increment",
            inputs={"X": counter},
            outputs={"Out": counter},
            attrs={"step": 1.0},
        )
    counter = block.var(LR_COUNTER_NAME)
    step = helper.create_variable(FLOAT32, stop_gradient=True)
    helper.append_op(
        "cast",
        inputs={"X": counter},
        outputs={"Out": step},
        attrs={"in_dtype": INT64, "out_dtype": FLOAT32},
    )
    return step


def _lr_decay(schedule: str, begin: int = 0, **attrs: object) -> Variable:
    step = _decay_step_counter(begin)
    helper = LayerHelper(schedule)
    out = helper.create_variable(FLOAT32, suffix="lr", stop_gradient=True)
    helper.append_op(
        "lr_decay",
        inputs={"Step": step},
        outputs={"Out": out},
        attrs={"schedule": schedule, **attrs},
    )
    return out


def _positive(name: str, value: float, where: str) -> float:
    if not value > 0:
        raise InvalidArgument(f"{where}: {name} must be positive, got {value}")
    return float(value)


def _rate_decay(
    schedule: str, learning_rate: float, decay_steps: int, decay_rate: float, staircase: bool
) -> Variable:
    """The schedules of one rate decaying over `decay_steps` (exponential, natural_exp,
    inverse_time): the same attributes, checked the same way."""
    return _lr_decay(
        schedule,
        learning_rate=float(learning_rate),
        decay_steps=_positive("decay_steps", decay_steps, schedule),
        decay_rate=float(decay_rate),
        staircase=bool(staircase),
    )


def exponential_decay(
    learning_rate: float, decay_steps: int, decay_rate: float, staircase: bool = False
) -> Variable:
    """learning_rate * decay_rate ^ (step / decay_steps), the exponent floored with staircase."""
    return _rate_decay("exponential_decay", learning_rate, decay_steps, decay_rate, staircase)


def natural_exp_decay(
    learning_rate: float, decay_steps: int, decay_rate: float, staircase: bool = False
) -> Variable:
    """learning_rate * exp(-decay_rate * step / decay_steps)."""
    return _rate_decay("natural_exp_decay", learning_rate, decay_steps, decay_rate, staircase)


def inverse_time_decay(
    learning_rate: float, decay_steps: int, decay_rate: float, staircase: bool = False
) -> Variable:
    """learning_rate / (1 + decay_rate * step / decay_steps)."""
    return _rate_decay("inverse_time_decay", learning_rate, decay_steps, decay_rate, staircase)


def piecewise_decay(boundaries: Sequence[float], values: Sequence[float]) -> Variable:
    """values[i] while step < boundaries[i] (the first such i), values[-1] after the last."""
    if len(values) != len(boundaries) + 1:
        raise InvalidArgument(
            f"piecewise_decay: values ({len(values)}) must have one entry more than "
            f"boundaries ({len(boundaries)})"
        )
    return _lr_decay(
        "piecewise_decay",
        boundaries=[float(b) for b in boundaries],
        values=[float(v) for v in values],
    )


def noam_decay(d_model: int, warmup_steps: int, learning_rate: float = 1.0) -> Variable:
    """learning_rate * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5), step from 1."""
    return _lr_decay(
        "noam_decay",
        begin=1,
        d_model=_positive("d_model", d_model, "noam_decay"),
        warmup_steps=_positive("warmup_steps", warmup_steps, "noam_decay"),
        learning_rate=float(learning_rate),
    )


def polynomial_decay(
    learning_rate: float,
    decay_steps: int,
    end_learning_rate: float = 0.0001,
    power: float = 1.0,
    cycle: bool = False,
) -> Variable:
    """(learning_rate - end) * (1 - step / decay_steps)^power + end; after decay_steps the end
    rate, or with cycle a new decay over the next multiple of decay_steps."""
    return _lr_decay(
        "polynomial_decay",
        learning_rate=float(learning_rate),
        decay_steps=_positive("decay_steps", decay_steps, "polynomial_decay"),
        end_learning_rate=float(end_learning_rate),
        power=float(power),
        cycle=bool(cycle),
    )


def cosine_decay(learning_rate: float, step_each_epoch: int, epochs: int) -> Variable:
    """learning_rate * (cos(epoch * pi / epochs) + 1) / 2 with epoch = floor(step /
    step_each_epoch)."""
    return _lr_decay(
        "cosine_decay",
        learning_rate=float(learning_rate),
        step_each_epoch=_positive("step_each_epoch", step_each_epoch, "cosine_decay"),
        epochs=_positive("epochs", epochs, "cosine_decay"),
    )
