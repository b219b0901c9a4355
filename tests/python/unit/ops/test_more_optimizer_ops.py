"""rmsprop (plain, with momentum, centered), ftrl, adamax, lamb and decayed_adagrad against
NumPy float64 versions of Paddle's update formulas, over several steps, with dense and
SelectedRows gradients (duplicate rows summed; rows absent from the gradient decay or stay as
each rule says)."""

from __future__ import annotations

import numpy as np
import pytest

from fleet.errors import InvalidArgument
from fleet.testing.op_test import Rows, run_op

RTOL, ATOL = 5e-5, 1e-6
HEIGHT, WIDTH = 6, 5
STEPS = 3


def _f32(rng: np.random.Generator, *shape: int, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    return rng.uniform(low, high, size=shape).astype(np.float32)


def _lr(value: float) -> np.ndarray:
    return np.array([value], dtype=np.float32)


def _grads(rng: np.random.Generator, sparse: bool) -> list[np.ndarray | Rows]:
    if not sparse:
        return [_f32(rng, HEIGHT, WIDTH) for _ in range(STEPS)]
    rows = [4, 1, 4, 2, 1]  # rows 1 and 4 repeated, 0, 3 and 5 absent
    return [Rows(rows, _f32(rng, len(rows), WIDTH), HEIGHT) for _ in range(STEPS)]


def _dense(grad: np.ndarray | Rows) -> np.ndarray:
    if isinstance(grad, np.ndarray):
        return grad.astype(np.float64)
    out = np.zeros((grad.height, WIDTH))
    np.add.at(out, np.asarray(grad.rows), grad.value.astype(np.float64))
    return out


def _present(grad: np.ndarray | Rows) -> np.ndarray:
    """Mask of the rows a gradient holds (all for a dense one)."""
    mask = np.zeros((HEIGHT, 1), dtype=bool)
    mask[list(range(HEIGHT)) if isinstance(grad, np.ndarray) else grad.rows] = True
    return mask


def _check(got: dict, want: dict) -> None:
    for slot, value in want.items():
        np.testing.assert_allclose(got[slot], value, rtol=RTOL, atol=ATOL, err_msg=slot)


# ---- decayed_adagrad -------------------------------------------------------------------------


@pytest.mark.parametrize("sparse", [False, True])
def test_decayed_adagrad_matches_numpy(sparse):
    rng = np.random.default_rng(1)
    p, m = _f32(rng, HEIGHT, WIDTH), _f32(rng, HEIGHT, WIDTH, low=0.0)
    grads = _grads(rng, sparse)
    lr, decay, eps = 0.1, 0.9, 1e-6
    state = {"Param": p, "Moment": m}
    for grad in grads:
        outs = run_op(
            "decayed_adagrad",
            {**state, "Grad": grad, "LearningRate": _lr(lr)},
            ["ParamOut", "MomentOut"],
            {"decay": decay, "epsilon": eps},
        )
        state = {"Param": outs["ParamOut"], "Moment": outs["MomentOut"]}
    rp, rm = p.astype(np.float64), m.astype(np.float64)
    for grad in grads:
        g = _dense(grad)
        rm = decay * rm + (1 - decay) * g * g
        rp = rp - lr * g / (np.sqrt(rm) + eps)
    _check(state, {"Param": rp, "Moment": rm})


# ---- rmsprop ----------------------------------------------------------------------------------


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("momentum,centered", [(0.0, False), (0.9, False), (0.5, True)])
def test_rmsprop_matches_numpy(sparse, momentum, centered):
    rng = np.random.default_rng(2)
    state = {
        "Param": _f32(rng, HEIGHT, WIDTH),
        "MeanSquare": _f32(rng, HEIGHT, WIDTH, low=0.5, high=1.0),
        "Moment": _f32(rng, HEIGHT, WIDTH),
    }
    if centered:
        state["MeanGrad"] = _f32(rng, HEIGHT, WIDTH, low=-0.1, high=0.1)
    grads = _grads(rng, sparse)
    lr, rho, eps = 0.05, 0.9, 1e-6
    ref = {k: v.astype(np.float64) for k, v in state.items()}
    attrs = {"decay": rho, "epsilon": eps, "momentum": momentum, "centered": centered}
    for grad in grads:
        outs = run_op(
            "rmsprop",
            {**state, "Grad": grad, "LearningRate": _lr(lr)},
            [f"{s}Out" for s in state],
            attrs,
        )
        state = {s: outs[f"{s}Out"] for s in state}
        g = _dense(grad)  # Paddle's sparse rmsprop updates every row, zeros where absent
        ref["MeanSquare"] = rho * ref["MeanSquare"] + (1 - rho) * g * g
        if centered:
            ref["MeanGrad"] = rho * ref["MeanGrad"] + (1 - rho) * g
            denom = np.sqrt(ref["MeanSquare"] - ref["MeanGrad"] ** 2 + eps)
        else:
            denom = np.sqrt(ref["MeanSquare"] + eps)
        ref["Moment"] = momentum * ref["Moment"] + lr * g / denom
        ref["Param"] = ref["Param"] - ref["Moment"]
    _check(state, ref)


def test_centered_rmsprop_without_mean_grad_is_an_error():
    rng = np.random.default_rng(3)
    inputs = {
        "Param": _f32(rng, 2, 2),
        "MeanSquare": _f32(rng, 2, 2, low=0.1),
        "Moment": _f32(rng, 2, 2),
        "Grad": _f32(rng, 2, 2),
        "LearningRate": _lr(0.1),
    }
    with pytest.raises(InvalidArgument, match="centered rmsprop needs MeanGrad"):
        run_op("rmsprop", inputs, ["ParamOut", "MeanSquareOut", "MomentOut"], {"centered": True})


# ---- ftrl -------------------------------------------------------------------------------------


def ftrl_ref(p, n, z, g, lr, l1, l2, lr_power):
    l1, l2 = l1 + 1e-10, l2 + 1e-10
    n_new = n + g * g
    sigma = (n_new ** (-lr_power) - n ** (-lr_power)) / lr
    z = z + g - sigma * p
    y = n_new ** (-lr_power) / lr + 2 * l2
    p = np.where(np.abs(z) > l1, (l1 * np.sign(z) - z) / y, 0.0)
    return p, n_new, z


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("l1,l2,lr_power", [(0.0, 0.0, -0.5), (0.05, 0.1, -0.5), (0.01, 0.0, -0.3)])
def test_ftrl_matches_numpy(sparse, l1, l2, lr_power):
    rng = np.random.default_rng(4)
    state = {
        "Param": _f32(rng, HEIGHT, WIDTH),
        "SquaredAccumulator": _f32(rng, HEIGHT, WIDTH, low=0.1, high=1.0),
        "LinearAccumulator": _f32(rng, HEIGHT, WIDTH),
    }
    grads = _grads(rng, sparse)
    lr = 0.1
    rp, rn, rz = (state[k].astype(np.float64) for k in state)
    for grad in grads:
        outs = run_op(
            "ftrl",
            {**state, "Grad": grad, "LearningRate": _lr(lr)},
            ["ParamOut", "SquaredAccumOut", "LinearAccumOut"],
            {"l1": l1, "l2": l2, "lr_power": lr_power},
        )
        state = {
            "Param": outs["ParamOut"],
            "SquaredAccumulator": outs["SquaredAccumOut"],
            "LinearAccumulator": outs["LinearAccumOut"],
        }
        new = ftrl_ref(rp, rn, rz, _dense(grad), lr, l1, l2, lr_power)
        keep = _present(grad)  # a sparse step leaves the absent rows as they were
        rp, rn, rz = (np.where(keep, a, b) for a, b in zip(new, (rp, rn, rz)))
    _check(
        state,
        {"Param": rp, "SquaredAccumulator": rn, "LinearAccumulator": rz},
    )


# ---- adamax -----------------------------------------------------------------------------------


@pytest.mark.parametrize("sparse", [False, True])
def test_adamax_matches_numpy(sparse):
    rng = np.random.default_rng(5)
    beta1, beta2, eps, lr = 0.9, 0.99, 1e-8, 0.01
    state = {
        "Param": _f32(rng, HEIGHT, WIDTH),
        "Moment": np.zeros((HEIGHT, WIDTH), np.float32),
        "InfNorm": np.zeros((HEIGHT, WIDTH), np.float32),
        "Beta1Pow": np.array([beta1], np.float32),
    }
    ref = {k: v.astype(np.float64) for k, v in state.items()}
    for grad in _grads(rng, sparse):
        outs = run_op(
            "adamax",
            {**state, "Grad": grad, "LearningRate": _lr(lr)},
            [f"{s}Out" for s in state],
            {"beta1": beta1, "beta2": beta2, "epsilon": eps},
        )
        state = {s: outs[f"{s}Out"] for s in state}
        g = _dense(grad)
        ref["Moment"] = beta1 * ref["Moment"] + (1 - beta1) * g
        ref["InfNorm"] = np.maximum(beta2 * ref["InfNorm"] + eps, np.abs(g))
        ref["Param"] = ref["Param"] - lr / (1 - ref["Beta1Pow"][0]) * ref["Moment"] / ref["InfNorm"]
        ref["Beta1Pow"] = ref["Beta1Pow"] * beta1
    _check(state, ref)


# ---- lamb -------------------------------------------------------------------------------------


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_lamb_matches_numpy(sparse, weight_decay):
    rng = np.random.default_rng(6)
    beta1, beta2, eps, lr = 0.9, 0.999, 1e-6, 0.02
    state = {
        "Param": _f32(rng, HEIGHT, WIDTH),
        "Moment1": np.zeros((HEIGHT, WIDTH), np.float32),
        "Moment2": np.zeros((HEIGHT, WIDTH), np.float32),
        "Beta1Pow": np.array([beta1], np.float32),
        "Beta2Pow": np.array([beta2], np.float32),
    }
    ref = {k: v.astype(np.float64) for k, v in state.items()}
    for grad in _grads(rng, sparse):
        outs = run_op(
            "lamb",
            {**state, "Grad": grad, "LearningRate": _lr(lr)},
            [f"{s}Out" for s in state],
            {"beta1": beta1, "beta2": beta2, "epsilon": eps, "weight_decay": weight_decay},
        )
        state = {s: outs[f"{s}Out"] for s in state}
        g = _dense(grad)
        ref["Moment1"] = beta1 * ref["Moment1"] + (1 - beta1) * g
        ref["Moment2"] = beta2 * ref["Moment2"] + (1 - beta2) * g * g
        m1_hat = ref["Moment1"] / (1 - ref["Beta1Pow"][0])
        m2_hat = ref["Moment2"] / (1 - ref["Beta2Pow"][0])
        r = m1_hat / (np.sqrt(m2_hat) + eps) + weight_decay * ref["Param"]
        ratio = np.linalg.norm(ref["Param"]) / np.linalg.norm(r)
        ref["Param"] = ref["Param"] - lr * ratio * r
        ref["Beta1Pow"] = ref["Beta1Pow"] * beta1
        ref["Beta2Pow"] = ref["Beta2Pow"] * beta2
    _check(state, ref)


def test_lamb_trust_ratio_is_one_for_a_zero_parameter():
    g = np.full((2, 3), 0.5, np.float32)
    zeros = np.zeros((2, 3), np.float32)
    outs = run_op(
        "lamb",
        {
            "Param": zeros,
            "Grad": g,
            "LearningRate": _lr(0.1),
            "Moment1": zeros,
            "Moment2": zeros,
            "Beta1Pow": np.array([0.9], np.float32),
            "Beta2Pow": np.array([0.999], np.float32),
        },
        ["ParamOut", "Moment1Out", "Moment2Out"],
        {"weight_decay": 0.0, "epsilon": 0.0},
    )
    # m1_hat / sqrt(m2_hat) = sign(g) on the first step, so the step is -lr.
    np.testing.assert_allclose(outs["ParamOut"], np.full((2, 3), -0.1), rtol=1e-5)


def test_a_gradient_of_the_wrong_shape_names_it():
    rng = np.random.default_rng(7)
    with pytest.raises(InvalidArgument, match="Grad 'Grad_0' has shape"):
        run_op(
            "decayed_adagrad",
            {
                "Param": _f32(rng, 2, 2),
                "Moment": _f32(rng, 2, 2),
                "Grad": _f32(rng, 3, 2),
                "LearningRate": _lr(0.1),
            },
            ["ParamOut", "MomentOut"],
        )
