"""dropout: both implementations in training and test mode, seeded determinism, the drop rate,
and gradients through the mask."""

import numpy as np
import pytest

from fleet.errors import InvalidArgument
from fleet.testing.op_test import Seq, check_grad, run_op

RNG = np.random.default_rng(9)
IMPLS = ["downgrade_in_infer", "upscale_in_train"]


def _dropout(x: np.ndarray, **attrs) -> dict:
    return run_op("dropout", {"X": x}, ["Out", "Mask"], attrs)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("prob", [0.0, 0.25, 0.6, 1.0])
def test_dropout_training_matches_mask(impl, prob):
    x = RNG.standard_normal((40, 50)).astype(np.float32)
    out = _dropout(x, dropout_prob=prob, fix_seed=True, seed=17, dropout_implementation=impl)
    mask = out["Mask"]
    assert set(np.unique(mask)) <= {0.0, 1.0}
    scale = 1 / (1 - prob) if impl == "upscale_in_train" and prob < 1 else 1.0
    np.testing.assert_allclose(out["Out"], x.astype(np.float64) * mask * scale, rtol=1e-6)
    # 2000 Bernoulli draws: the dropped fraction is within 4 standard deviations of p.
    dropped = 1 - mask.mean()
    assert abs(dropped - prob) <= 4 * np.sqrt(prob * (1 - prob) / mask.size) + 1e-9


@pytest.mark.parametrize("impl,factor", [("downgrade_in_infer", 0.7), ("upscale_in_train", 1.0)])
def test_dropout_test_mode_scales(impl, factor):
    x = RNG.standard_normal((6, 4)).astype(np.float32)
    out = run_op(
        "dropout",
        {"X": Seq(x, [[0, 1, 6]])},
        ["Out"],
        {"dropout_prob": 0.3, "is_test": True, "dropout_implementation": impl},
        raw=True,
    )["Out"]
    np.testing.assert_allclose(np.asarray(out), x.astype(np.float64) * factor, rtol=1e-6)
    assert out.lod() == [[0, 1, 6]]


def test_dropout_fix_seed_is_deterministic():
    x = np.ones((30, 30), dtype=np.float32)
    first = _dropout(x, dropout_prob=0.5, fix_seed=True, seed=3)["Mask"]
    again = _dropout(x, dropout_prob=0.5, fix_seed=True, seed=3)["Mask"]
    other = _dropout(x, dropout_prob=0.5, fix_seed=True, seed=4)["Mask"]
    unseeded = _dropout(x, dropout_prob=0.5)["Mask"]
    np.testing.assert_array_equal(first, again)
    assert (first != other).any()
    assert (first != unseeded).any()


@pytest.mark.parametrize("impl", IMPLS)
def test_dropout_gradient(impl):
    x = RNG.standard_normal((4, 5)).astype(np.float32)
    attrs = {"dropout_prob": 0.4, "fix_seed": True, "seed": 11, "dropout_implementation": impl}
    # Mask is a constant of X, so weighting it in the loss only binds it for the grad op.
    check_grad("dropout", {"X": x}, wrt=["X"], attrs=attrs, out_slots=["Out", "Mask"])
    check_grad("dropout", {"X": x}, wrt=["X"], attrs={**attrs, "is_test": True})


def test_dropout_rejects_bad_attributes():
    x = np.ones((2, 2), dtype=np.float32)
    with pytest.raises(InvalidArgument, match="dropout_prob 1.5 is outside"):
        _dropout(x, dropout_prob=1.5)
    with pytest.raises(InvalidArgument, match="dropout_implementation 'sometimes'"):
        _dropout(x, dropout_prob=0.5, dropout_implementation="sometimes")
