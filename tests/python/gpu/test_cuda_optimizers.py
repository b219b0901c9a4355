"""The CUDA sgd and adam updates (fleet._core.cuda_*) against the CPU ops. Comparisons need a
CUDA device and skip without one; the other tests check argument validation, which runs in every
build, and the behaviour without a device."""

from __future__ import annotations

import numpy as np
import pytest

from fleet import _core
from fleet.errors import InvalidArgument, Unavailable
from fleet.testing.op_test import run_op


@pytest.fixture
def device() -> int:
    if _core.cuda_device_count() == 0:
        pytest.skip("no CUDA device visible (no GPU, no driver, or Fleet built without CUDA)")
    return 0


def _f32(rng: np.random.Generator, n: int, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    return rng.uniform(low, high, size=n).astype(np.float32)


def _lr(value: float) -> np.ndarray:
    return np.array([value], dtype=np.float32)


# 400x400 (an fc weight), and a size past one grid (4096 blocks of 256) with a ragged tail.
SIZES = [160_000, 1_048_576 + 4097]


@pytest.mark.gpu
@pytest.mark.parametrize("n", SIZES)
def test_sgd_matches_the_cpu_op(device: int, n: int) -> None:
    rng = np.random.default_rng(0)
    p, g = _f32(rng, n), _f32(rng, n)
    want = run_op("sgd", {"Param": p, "Grad": g, "LearningRate": _lr(0.3)}, ["ParamOut"])[
        "ParamOut"
    ]
    got = p.copy()
    _core.cuda_sgd_update(got, g, 0.3, device=device)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.gpu
@pytest.mark.parametrize("n", SIZES)
def test_adam_steps_match_the_cpu_op(device: int, n: int) -> None:
    rng = np.random.default_rng(1)
    p = _f32(rng, n)
    m1, m2 = _f32(rng, n, -0.1, 0.1), _f32(rng, n, 0.0, 0.1)
    b1p, b2p = np.array([0.9], np.float32), np.array([0.999], np.float32)
    gpu = [a.copy() for a in (p, m1, m2, b1p, b2p)]
    cpu = [a.copy() for a in (p, m1, m2, b1p, b2p)]
    attrs = {"beta1": 0.8, "beta2": 0.99, "epsilon": 1e-6}
    for _ in range(3):
        g = _f32(rng, n)
        out = run_op(
            "adam",
            {
                "Param": cpu[0],
                "Grad": g,
                "LearningRate": _lr(0.01),
                "Moment1": cpu[1],
                "Moment2": cpu[2],
                "Beta1Pow": cpu[3],
                "Beta2Pow": cpu[4],
            },
            ["ParamOut", "Moment1Out", "Moment2Out", "Beta1PowOut", "Beta2PowOut"],
            attrs,
        )
        cpu = [
            out[s] for s in ("ParamOut", "Moment1Out", "Moment2Out", "Beta1PowOut", "Beta2PowOut")
        ]
        _core.cuda_adam_update(*gpu[:1], g, *gpu[1:], lr=0.01, device=device, **attrs)
    for got, want, name in zip(gpu, cpu, ["param", "moment1", "moment2", "b1p", "b2p"]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.gpu
def test_device_queries_and_bad_device_id(device: int) -> None:
    count = _core.cuda_device_count()
    assert count >= 1
    assert _core.cuda_device_name(device)
    p = np.zeros(4, np.float32)
    with pytest.raises(InvalidArgument, match=rf"\({count}\): no such CUDA device"):
        _core.cuda_sgd_update(p, p.copy(), 0.1, device=count)


def test_without_a_device_count_is_zero_and_updates_raise_unavailable() -> None:
    if _core.cuda_device_count() > 0:
        pytest.skip("a CUDA device is visible; this test is about machines without one")
    p, g = np.ones(8, np.float32), np.ones(8, np.float32)
    with pytest.raises(Unavailable, match="cuda|CUDA"):
        _core.cuda_sgd_update(p, g, 0.1)
    m1, m2 = np.zeros(8, np.float32), np.zeros(8, np.float32)
    b1p, b2p = np.array([0.9], np.float32), np.array([0.999], np.float32)
    with pytest.raises(Unavailable):
        _core.cuda_adam_update(p, g, m1, m2, b1p, b2p, lr=0.1)
    with pytest.raises(Unavailable):
        _core.cuda_device_name(0)
    np.testing.assert_array_equal(p, np.ones(8, np.float32))  # nothing was written
    np.testing.assert_array_equal(b1p, np.array([0.9], np.float32))


def test_arguments_are_checked_before_any_device_work() -> None:
    p = np.zeros(6, np.float32)
    with pytest.raises(InvalidArgument, match="grad has 5 elements, expected 6"):
        _core.cuda_sgd_update(p, np.zeros(5, np.float32), 0.1)
    with pytest.raises(InvalidArgument, match="param must be a float32 array, got float64"):
        _core.cuda_sgd_update(np.zeros(6), np.zeros(6, np.float32), 0.1)
    with pytest.raises(InvalidArgument, match="param must be C-contiguous"):
        _core.cuda_sgd_update(np.zeros(12, np.float32)[::2], p, 0.1)
    readonly = np.zeros(6, np.float32)
    readonly.flags.writeable = False
    with pytest.raises(InvalidArgument, match="param must be writeable"):
        _core.cuda_sgd_update(readonly, p, 0.1)
    with pytest.raises(InvalidArgument, match="beta1_pow has 2 elements, expected 1"):
        _core.cuda_adam_update(
            p, p, p.copy(), p.copy(), np.ones(2, np.float32), np.ones(1, np.float32), lr=0.1
        )
