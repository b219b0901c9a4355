"""Optimizer ops (sgd, momentum, adagrad, adam) against NumPy float64 versions of Paddle's
formulas: one and several steps, dense and SelectedRows gradients (with duplicate rows), lazy and
non-lazy Adam, Nesterov momentum, in-place updates and bad inputs."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pytest

from fleet import _core
from fleet.errors import InvalidArgument, NotFound
from fleet.proto import framework_pb2 as pb
from fleet.testing.op_test import Rows, make_op_desc, run_op

RTOL, ATOL = 2e-5, 1e-6
HEIGHT, WIDTH = 6, 5


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _f32(rng: np.random.Generator, *shape: int, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    return rng.uniform(low, high, size=shape).astype(np.float32)


def _lr(value: float) -> np.ndarray:
    return np.array([value], dtype=np.float32)


def _dense(grad: np.ndarray | Rows) -> np.ndarray:
    """The dense float64 gradient a SelectedRows stands for (duplicate rows summed)."""
    if isinstance(grad, np.ndarray):
        return grad.astype(np.float64)
    out = np.zeros((grad.height, grad.value.shape[1]), dtype=np.float64)
    np.add.at(out, np.asarray(grad.rows), grad.value.astype(np.float64))
    return out


def _sparse_grad(rng: np.random.Generator) -> Rows:
    """Rows 1 and 4 repeated, rows 0, 3 and 5 absent."""
    rows = [4, 1, 4, 2, 1]
    return Rows(rows, _f32(rng, len(rows), WIDTH), HEIGHT)


# ---- NumPy references (float64), same formulas as paddle/fluid/operators/optimizers.


def sgd_ref(p: np.ndarray, g: np.ndarray, lr: float) -> np.ndarray:
    return p - lr * g


def momentum_ref(
    p: np.ndarray, v: np.ndarray, g: np.ndarray, lr: float, mu: float, nesterov: bool
) -> tuple[np.ndarray, np.ndarray]:
    v = mu * v + g
    return (p - lr * (g + mu * v) if nesterov else p - lr * v), v


def adagrad_ref(
    p: np.ndarray, m: np.ndarray, g: np.ndarray, lr: float, eps: float
) -> tuple[np.ndarray, np.ndarray]:
    m = m + g * g
    return p - lr * g / (np.sqrt(m) + eps), m


def adam_ref(
    state: dict[str, np.ndarray],
    g: np.ndarray,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    rows: list[int] | None = None,
) -> dict[str, np.ndarray]:
    """One Adam step; with `rows` (lazy mode) only those rows change."""
    p, m1, m2 = (state[k].astype(np.float64) for k in ("p", "m1", "m2"))
    b1p, b2p = float(state["b1p"][0]), float(state["b2p"][0])
    lr_t = lr * np.sqrt(1 - b2p) / (1 - b1p)
    new_m1 = beta1 * m1 + (1 - beta1) * g
    new_m2 = beta2 * m2 + (1 - beta2) * g * g
    new_p = p - lr_t * new_m1 / (np.sqrt(new_m2) + eps * np.sqrt(1 - b2p))
    if rows is not None:
        keep = np.ones(p.shape[0], dtype=bool)
        keep[np.unique(rows)] = False
        for new, old in ((new_p, p), (new_m1, m1), (new_m2, m2)):
            new[keep] = old[keep]
    return {
        "p": new_p,
        "m1": new_m1,
        "m2": new_m2,
        "b1p": np.array([b1p * beta1]),
        "b2p": np.array([b2p * beta2]),
    }


def _close(got: np.ndarray, want: np.ndarray, rtol: float = RTOL, atol: float = ATOL) -> None:
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=rtol, atol=atol)


# ---- sgd


@pytest.mark.parametrize("sparse", [False, True])
def test_sgd_steps(sparse: bool) -> None:
    rng = _rng(1)
    p = _f32(rng, HEIGHT, WIDTH)
    want = p.astype(np.float64)
    for step in range(3):
        g = _sparse_grad(rng) if sparse else _f32(rng, HEIGHT, WIDTH)
        lr = 0.1 * (step + 1)
        out = run_op("sgd", {"Param": p, "Grad": g, "LearningRate": _lr(lr)}, ["ParamOut"])
        p = out["ParamOut"]
        want = sgd_ref(want, _dense(g), lr)
        _close(p, want)


def test_sgd_sparse_leaves_absent_rows_untouched() -> None:
    rng = _rng(2)
    p = _f32(rng, HEIGHT, WIDTH)
    g = _sparse_grad(rng)
    out = run_op("sgd", {"Param": p, "Grad": g, "LearningRate": _lr(0.5)}, ["ParamOut"])["ParamOut"]
    absent = [r for r in range(HEIGHT) if r not in g.rows]
    np.testing.assert_array_equal(out[absent], p[absent])


# ---- momentum


@pytest.mark.parametrize("nesterov", [False, True])
@pytest.mark.parametrize("sparse", [False, True])
def test_momentum_steps(nesterov: bool, sparse: bool) -> None:
    rng = _rng(3)
    p, v = _f32(rng, HEIGHT, WIDTH), _f32(rng, HEIGHT, WIDTH)
    want_p, want_v = p.astype(np.float64), v.astype(np.float64)
    attrs = {"mu": 0.9, "use_nesterov": nesterov}
    for _ in range(4):
        g = _sparse_grad(rng) if sparse else _f32(rng, HEIGHT, WIDTH)
        out = run_op(
            "momentum",
            {"Param": p, "Grad": g, "Velocity": v, "LearningRate": _lr(0.05)},
            ["ParamOut", "VelocityOut"],
            attrs,
        )
        p, v = out["ParamOut"], out["VelocityOut"]
        # Sparse momentum decays the velocity of every row, as Paddle does.
        want_p, want_v = momentum_ref(want_p, want_v, _dense(g), 0.05, 0.9, nesterov)
        _close(p, want_p)
        _close(v, want_v)


# ---- adagrad


@pytest.mark.parametrize("sparse", [False, True])
def test_adagrad_steps(sparse: bool) -> None:
    rng = _rng(4)
    p, m = _f32(rng, HEIGHT, WIDTH), _f32(rng, HEIGHT, WIDTH, low=0.0, high=0.5)
    want_p, want_m = p.astype(np.float64), m.astype(np.float64)
    for _ in range(3):
        g = _sparse_grad(rng) if sparse else _f32(rng, HEIGHT, WIDTH)
        out = run_op(
            "adagrad",
            {"Param": p, "Grad": g, "Moment": m, "LearningRate": _lr(0.1)},
            ["ParamOut", "MomentOut"],
            {"epsilon": 1e-6},
        )
        p, m = out["ParamOut"], out["MomentOut"]
        want_p, want_m = adagrad_ref(want_p, want_m, _dense(g), 0.1, 1e-6)
        _close(p, want_p)
        _close(m, want_m)


def test_adagrad_default_epsilon() -> None:
    rng = _rng(5)
    p, g = _f32(rng, 3, 4), _f32(rng, 3, 4)
    m = np.zeros((3, 4), dtype=np.float32)
    out = run_op(
        "adagrad",
        {"Param": p, "Grad": g, "Moment": m, "LearningRate": _lr(0.1)},
        ["ParamOut", "MomentOut"],
    )
    _close(out["ParamOut"], adagrad_ref(p.astype(np.float64), m, g, 0.1, 1e-6)[0])


# ---- adam

ADAM_OUTS = ["ParamOut", "Moment1Out", "Moment2Out", "Beta1PowOut", "Beta2PowOut"]


def _adam_state(rng: np.random.Generator) -> dict[str, np.ndarray]:
    # Non-zero moments, so that rows without a gradient visibly move in non-lazy mode.
    return {
        "p": _f32(rng, HEIGHT, WIDTH),
        "m1": _f32(rng, HEIGHT, WIDTH, low=-0.1, high=0.1),
        "m2": _f32(rng, HEIGHT, WIDTH, low=0.01, high=0.1),
        "b1p": np.array([0.9], dtype=np.float32),
        "b2p": np.array([0.999], dtype=np.float32),
    }


def _run_adam(
    state: dict[str, np.ndarray], g: np.ndarray | Rows, lr: float, attrs: Mapping[str, Any]
) -> dict[str, np.ndarray]:
    out = run_op(
        "adam",
        {
            "Param": state["p"],
            "Grad": g,
            "LearningRate": _lr(lr),
            "Moment1": state["m1"],
            "Moment2": state["m2"],
            "Beta1Pow": state["b1p"],
            "Beta2Pow": state["b2p"],
        },
        ADAM_OUTS,
        attrs,
    )
    return dict(zip(["p", "m1", "m2", "b1p", "b2p"], (out[s] for s in ADAM_OUTS)))


@pytest.mark.parametrize("grad_kind", ["dense", "sparse", "sparse_lazy"])
def test_adam_steps(grad_kind: str) -> None:
    rng = _rng(6)
    state = _adam_state(rng)
    want = {k: v.astype(np.float64) for k, v in state.items()}
    lazy = grad_kind == "sparse_lazy"
    attrs = {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "lazy_mode": lazy}
    for _ in range(5):
        g = _f32(rng, HEIGHT, WIDTH) if grad_kind == "dense" else _sparse_grad(rng)
        state = _run_adam(state, g, 0.01, attrs)
        want = adam_ref(want, _dense(g), 0.01, 0.9, 0.999, 1e-8, rows=g.rows if lazy else None)
        for key in want:
            _close(state[key], want[key])


def test_adam_lazy_and_non_lazy_differ_only_on_absent_rows() -> None:
    rng = _rng(7)
    state, g = _adam_state(rng), _sparse_grad(rng)
    lazy = _run_adam(state, g, 0.01, {"lazy_mode": True})
    eager = _run_adam(state, g, 0.01, {"lazy_mode": False})
    present = sorted(set(g.rows))
    absent = [r for r in range(HEIGHT) if r not in present]
    for key in ("p", "m1", "m2"):
        np.testing.assert_array_equal(lazy[key][present], eager[key][present])
        np.testing.assert_array_equal(lazy[key][absent], state[key][absent])
        assert np.all(eager[key][absent] != state[key][absent]), key


def test_adam_default_attributes_and_custom_betas() -> None:
    rng = _rng(8)
    state, g = _adam_state(rng), _f32(rng, HEIGHT, WIDTH)
    want = adam_ref({k: v.astype(np.float64) for k, v in state.items()}, g, 0.001, 0.9, 0.999, 1e-8)
    got = _run_adam(state, g, 0.001, {})
    for key in want:
        _close(got[key], want[key])
    want = adam_ref({k: v.astype(np.float64) for k, v in state.items()}, g, 0.001, 0.5, 0.75, 1e-3)
    got = _run_adam(state, g, 0.001, {"beta1": 0.5, "beta2": 0.75, "epsilon": 1e-3})
    for key in want:
        _close(got[key], want[key])


# ---- in place: ParamOut bound to the Param variable itself, as programs do


def _run_program(
    op_type: str,
    inputs: Mapping[str, Any],
    outputs: Mapping[str, str],
    attrs: Mapping[str, Any],
    steps: int,
) -> Any:
    """Runs one op `steps` times in one scope; `outputs` maps output slots to variable names
    (input variables are named after their slots). Returns the scope."""
    scope = _core.Scope()
    for name, value in inputs.items():
        if isinstance(value, Rows):
            scope.var(name).get_selected_rows().set(value.rows, value.value, value.height)
        else:
            scope.var(name).get_tensor().set(value)
    op = make_op_desc(
        op_type,
        {slot: [slot] for slot in inputs},
        {slot: [name] for slot, name in outputs.items()},
        attrs,
    )
    program = pb.ProgramDesc()
    program.blocks.add(idx=0, parent_idx=-1).ops.append(op)
    executor = _core.Executor()
    prepared = executor.prepare(program.SerializeToString(), 0)
    for _ in range(steps):
        executor.run(prepared, scope, [])
    return scope


@pytest.mark.parametrize("sparse", [False, True])
def test_adam_in_place_several_steps(sparse: bool) -> None:
    rng = _rng(9)
    state = _adam_state(rng)
    g = _sparse_grad(rng) if sparse else _f32(rng, HEIGHT, WIDTH)
    inputs = {
        "Param": state["p"],
        "Grad": g,
        "LearningRate": _lr(0.01),
        "Moment1": state["m1"],
        "Moment2": state["m2"],
        "Beta1Pow": state["b1p"],
        "Beta2Pow": state["b2p"],
    }
    outputs = {
        "ParamOut": "Param",
        "Moment1Out": "Moment1",
        "Moment2Out": "Moment2",
        "Beta1PowOut": "Beta1Pow",
        "Beta2PowOut": "Beta2Pow",
    }
    scope = _run_program("adam", inputs, outputs, {"lazy_mode": False}, steps=3)
    want = {k: v.astype(np.float64) for k, v in state.items()}
    for _ in range(3):
        want = adam_ref(want, _dense(g), 0.01, 0.9, 0.999, 1e-8)
    for key, name in (
        ("p", "Param"),
        ("m1", "Moment1"),
        ("m2", "Moment2"),
        ("b1p", "Beta1Pow"),
        ("b2p", "Beta2Pow"),
    ):
        _close(scope.find_var(name).get_tensor().numpy(), want[key])


def test_in_place_and_separate_outputs_agree_and_separate_leaves_input() -> None:
    rng = _rng(10)
    p, v, g = _f32(rng, HEIGHT, WIDTH), _f32(rng, HEIGHT, WIDTH), _f32(rng, HEIGHT, WIDTH)
    inputs = {"Param": p, "Grad": g, "Velocity": v, "LearningRate": _lr(0.1)}
    attrs = {"mu": 0.5}
    same = _run_program(
        "momentum", inputs, {"ParamOut": "Param", "VelocityOut": "Velocity"}, attrs, steps=1
    )
    apart = _run_program(
        "momentum", inputs, {"ParamOut": "p_new", "VelocityOut": "v_new"}, attrs, steps=1
    )
    np.testing.assert_array_equal(
        same.find_var("Param").get_tensor().numpy(), apart.find_var("p_new").get_tensor().numpy()
    )
    np.testing.assert_array_equal(
        same.find_var("Velocity").get_tensor().numpy(), apart.find_var("v_new").get_tensor().numpy()
    )
    np.testing.assert_array_equal(apart.find_var("Param").get_tensor().numpy(), p)
    np.testing.assert_array_equal(apart.find_var("Velocity").get_tensor().numpy(), v)


def test_sgd_in_place_large_dense() -> None:
    # 400x400, the fc weight size the loops are tuned for, with an odd tail element.
    rng = _rng(11)
    p, g = _f32(rng, 401, 400), _f32(rng, 401, 400)
    scope = _run_program(
        "sgd",
        {"Param": p, "Grad": g, "LearningRate": _lr(0.25)},
        {"ParamOut": "Param"},
        {},
        steps=2,
    )
    want = sgd_ref(sgd_ref(p.astype(np.float64), g, 0.25), g, 0.25)
    _close(scope.find_var("Param").get_tensor().numpy(), want)


# ---- errors


@pytest.mark.parametrize("bad_row", [HEIGHT, -1, 1000])
@pytest.mark.parametrize("op_type", ["sgd", "momentum", "adagrad", "adam"])
def test_sparse_row_outside_height_is_invalid(op_type: str, bad_row: int) -> None:
    rng = _rng(12)
    p = _f32(rng, HEIGHT, WIDTH)
    inputs: dict[str, Any] = {
        "Param": p,
        "LearningRate": _lr(0.1),
        "Grad": Rows([0, bad_row, 2], _f32(rng, 3, WIDTH), HEIGHT),
    }
    state_slots = {
        "sgd": [],
        "momentum": ["Velocity"],
        "adagrad": ["Moment"],
        "adam": ["Moment1", "Moment2"],
    }[op_type]
    for slot in state_slots:
        inputs[slot] = np.zeros_like(p)
    outputs = ["ParamOut"] + [slot + "Out" for slot in state_slots]
    if op_type == "adam":
        inputs["Beta1Pow"] = np.array([0.9], dtype=np.float32)
        inputs["Beta2Pow"] = np.array([0.999], dtype=np.float32)
    with pytest.raises(InvalidArgument, match=rf"row {bad_row} \(entry 1\) is outside \[0, 6\)"):
        run_op(op_type, inputs, outputs, {"mu": 0.9})


def test_grad_height_must_match_param_rows() -> None:
    rng = _rng(13)
    g = Rows([0, 1], _f32(rng, 2, WIDTH), HEIGHT + 1)
    with pytest.raises(InvalidArgument, match="has height 7 but Param has 6 rows"):
        run_op(
            "sgd",
            {"Param": _f32(rng, HEIGHT, WIDTH), "Grad": g, "LearningRate": _lr(0.1)},
            ["ParamOut"],
        )


def test_dense_grad_shape_mismatch_names_the_variable() -> None:
    rng = _rng(14)
    with pytest.raises(InvalidArgument, match=r"Grad 'Grad_0' has shape \[6, 4\]"):
        run_op(
            "sgd",
            {
                "Param": _f32(rng, HEIGHT, WIDTH),
                "Grad": _f32(rng, HEIGHT, 4),
                "LearningRate": _lr(0.1),
            },
            ["ParamOut"],
        )


def test_state_shape_and_learning_rate_are_checked() -> None:
    rng = _rng(15)
    p = _f32(rng, HEIGHT, WIDTH)
    with pytest.raises(InvalidArgument, match=r"Velocity 'Velocity_0' has shape \[5, 6\]"):
        run_op(
            "momentum",
            {"Param": p, "Grad": p, "Velocity": _f32(rng, WIDTH, HEIGHT), "LearningRate": _lr(0.1)},
            ["ParamOut", "VelocityOut"],
            {"mu": 0.9},
        )
    with pytest.raises(
        InvalidArgument,
        match="LearningRate 'LearningRate_0' must be a float32 tensor with one element",
    ):
        run_op(
            "sgd",
            {"Param": p, "Grad": p, "LearningRate": np.array([0.1, 0.2], np.float32)},
            ["ParamOut"],
        )
    with pytest.raises(InvalidArgument, match="Param 'Param_0' is float64, expected float32"):
        run_op(
            "sgd",
            {"Param": p.astype(np.float64), "Grad": p, "LearningRate": _lr(0.1)},
            ["ParamOut"],
        )


def test_momentum_requires_mu() -> None:
    rng = _rng(16)
    p = _f32(rng, 2, 3)
    with pytest.raises(NotFound, match="missing attribute 'mu'"):
        run_op(
            "momentum",
            {"Param": p, "Grad": p, "Velocity": p, "LearningRate": _lr(0.1)},
            ["ParamOut", "VelocityOut"],
        )


def test_optimizer_ops_have_no_gradient() -> None:
    for op_type in ("sgd", "momentum", "adagrad", "adam"):
        assert _core.op_registry.has_op(op_type)
        assert not _core.op_registry.has_grad(op_type)


# ---- sparse_weight_decay: the penalty's gradient added once to each row a SelectedRows holds.


@pytest.mark.parametrize("kind", ["l2", "l1"])
def test_sparse_weight_decay_adds_the_penalty_once_to_each_row_read(kind: str) -> None:
    rng = _rng(7)
    param = _f32(rng, HEIGHT, WIDTH)
    grad = _sparse_grad(rng)  # rows 4 and 1 twice, 2 once
    coeff = 0.25
    out = run_op(
        "sparse_weight_decay",
        {"Param": param, "Grad": grad},
        ["Out"],
        {"kind": kind, "coeff": coeff},
        raw=True,
    )["Out"]
    rows = list(out.rows())
    assert rows == [4, 1, 2]  # each row once, first-seen order
    penalty = param.astype(np.float64) if kind == "l2" else np.sign(param).astype(np.float64)
    dense = _dense(grad)
    expected = dense[rows] + coeff * penalty[rows]
    np.testing.assert_allclose(np.asarray(out.numpy_value()), expected, rtol=RTOL, atol=ATOL)
    assert out.height() == HEIGHT


def test_sparse_weight_decay_refuses_an_unknown_kind() -> None:
    rng = _rng(8)
    with pytest.raises(InvalidArgument, match="kind 'l3' is unknown"):
        run_op(
            "sparse_weight_decay",
            {"Param": _f32(rng, HEIGHT, WIDTH), "Grad": _sparse_grad(rng)},
            ["Out"],
            {"kind": "l3", "coeff": 0.1},
        )
