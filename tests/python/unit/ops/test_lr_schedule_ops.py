"""increment and lr_decay: every schedule against a Python float64 version of fluid's formula
over a range of steps, and the errors."""

import math

import numpy as np
import pytest

from fleet.errors import InvalidArgument
from fleet.testing.op_test import run_op

STEPS = [0, 1, 2, 5, 9, 10, 11, 37, 100, 250]


def reference_rate(schedule, step, attrs):
    lr = attrs.get("learning_rate", 1.0)
    if schedule in ("exponential_decay", "natural_exp_decay", "inverse_time_decay"):
        div = step / attrs["decay_steps"]
        if attrs.get("staircase"):
            div = math.floor(div)
        if schedule == "exponential_decay":
            return lr * attrs["decay_rate"] ** div
        if schedule == "natural_exp_decay":
            return lr * math.exp(-attrs["decay_rate"] * div)
        return lr / (1 + attrs["decay_rate"] * div)
    if schedule == "piecewise_decay":
        for boundary, value in zip(attrs["boundaries"], attrs["values"]):
            if step < boundary:
                return value
        return attrs["values"][-1]
    if schedule == "noam_decay":
        s = max(step, 1)
        return lr * attrs["d_model"] ** -0.5 * min(s**-0.5, s * attrs["warmup_steps"] ** -1.5)
    if schedule == "polynomial_decay":
        decay_steps = attrs["decay_steps"]
        if attrs.get("cycle"):
            decay_steps *= max(math.ceil(step / decay_steps), 1)
        else:
            step = min(step, decay_steps)
        end = attrs["end_learning_rate"]
        return (lr - end) * (1 - step / decay_steps) ** attrs["power"] + end
    assert schedule == "cosine_decay"
    epoch = math.floor(step / attrs["step_each_epoch"])
    return lr * 0.5 * (math.cos(epoch * math.pi / attrs["epochs"]) + 1)


SCHEDULES = [
    ("exponential_decay", {"learning_rate": 0.1, "decay_steps": 10.0, "decay_rate": 0.5}),
    (
        "exponential_decay",
        {"learning_rate": 0.1, "decay_steps": 10.0, "decay_rate": 0.5, "staircase": True},
    ),
    ("natural_exp_decay", {"learning_rate": 0.1, "decay_steps": 10.0, "decay_rate": 0.3}),
    ("inverse_time_decay", {"learning_rate": 0.1, "decay_steps": 10.0, "decay_rate": 0.3}),
    ("piecewise_decay", {"boundaries": [10.0, 100.0], "values": [1.0, 0.5, 0.1]}),
    ("noam_decay", {"learning_rate": 2.0, "d_model": 512.0, "warmup_steps": 10.0}),
    (
        "polynomial_decay",
        {"learning_rate": 0.1, "decay_steps": 50.0, "end_learning_rate": 0.001, "power": 2.0},
    ),
    (
        "polynomial_decay",
        {
            "learning_rate": 0.1,
            "decay_steps": 50.0,
            "end_learning_rate": 0.001,
            "power": 1.0,
            "cycle": True,
        },
    ),
    ("cosine_decay", {"learning_rate": 0.1, "step_each_epoch": 10.0, "epochs": 30.0}),
]


@pytest.mark.parametrize("schedule,attrs", SCHEDULES)
def test_lr_decay_matches_the_formula(schedule, attrs):
    for step in STEPS:
        out = run_op(
            "lr_decay",
            {"Step": np.array([step], np.float32)},
            ["Out"],
            {"schedule": schedule, **attrs},
        )["Out"]
        assert out.shape == (1,)
        want = reference_rate(schedule, step, attrs)
        np.testing.assert_allclose(out[0], want, rtol=1e-5, err_msg=f"{schedule} at step {step}")


def test_lr_decay_errors_name_the_attribute():
    step = {"Step": np.array([3], np.float32)}
    with pytest.raises(InvalidArgument, match="unknown schedule 'linear'"):
        run_op("lr_decay", step, ["Out"], {"schedule": "linear"})
    with pytest.raises(InvalidArgument, match="decay_steps"):
        run_op(
            "lr_decay",
            step,
            ["Out"],
            {"schedule": "exponential_decay", "decay_steps": 0.0, "decay_rate": 0.5},
        )
    with pytest.raises(InvalidArgument, match="one value more than boundaries"):
        run_op(
            "lr_decay",
            step,
            ["Out"],
            {"schedule": "piecewise_decay", "boundaries": [1.0], "values": [1.0]},
        )


def test_increment_adds_the_step_in_the_input_dtype():
    out = run_op("increment", {"X": np.array([41], np.int64)}, ["Out"], {"step": 1.0})["Out"]
    assert out.dtype == np.int64 and out.tolist() == [42]
    out = run_op("increment", {"X": np.array([0.5], np.float32)}, ["Out"], {"step": 2.0})["Out"]
    np.testing.assert_allclose(out, [2.5])
    with pytest.raises(InvalidArgument, match="must hold one element"):
        run_op("increment", {"X": np.zeros(2, np.int64)}, ["Out"])
