import numpy as np
import pytest

from fleet.errors import InvalidArgument
from fleet.testing.op_test import check_grad, run_op

RNG = np.random.default_rng(7)


def _away_from_kink(shape):
    x = RNG.standard_normal(shape).astype(np.float32)
    return x + np.sign(x) * 0.05


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 5), (7,)])
def test_activations_match_numpy(shape):
    x = RNG.standard_normal(shape).astype(np.float32)
    np.testing.assert_allclose(run_op("relu", {"X": x}, ["Out"])["Out"], np.maximum(x, 0))
    np.testing.assert_allclose(
        run_op("sigmoid", {"X": x}, ["Out"])["Out"],
        1 / (1 + np.exp(-x.astype(np.float64))),
        rtol=1e-6,
    )
    np.testing.assert_allclose(
        run_op("tanh", {"X": x}, ["Out"])["Out"],
        np.tanh(x.astype(np.float64)),
        rtol=1e-5,
        atol=1e-7,
    )


def test_scale_both_bias_orders():
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    after = run_op("scale", {"X": x}, ["Out"], {"scale": 2.0, "bias": 0.5})["Out"]
    before = run_op(
        "scale", {"X": x}, ["Out"], {"scale": 2.0, "bias": 0.5, "bias_after_scale": False}
    )["Out"]
    np.testing.assert_allclose(after, 2 * x + 0.5, rtol=1e-6)
    np.testing.assert_allclose(before, 2 * (x + 0.5), rtol=1e-6)


def test_sign_matches_numpy():
    x = np.array([[-2.5, 0.0, 3.0], [1e-30, -0.0, -1e-30]], dtype=np.float32)
    np.testing.assert_array_equal(run_op("sign", {"X": x}, ["Out"])["Out"], np.sign(x))


def test_activation_gradients():
    check_grad("relu", {"X": _away_from_kink((3, 4))}, wrt=["X"])
    check_grad("sigmoid", {"X": RNG.standard_normal((3, 4)).astype(np.float32)}, wrt=["X"])
    check_grad("tanh", {"X": RNG.standard_normal((2, 5)).astype(np.float32)}, wrt=["X"])
    check_grad(
        "scale",
        {"X": RNG.standard_normal((2, 5)).astype(np.float32)},
        wrt=["X"],
        attrs={"scale": -1.5, "bias": 2.0},
    )


def test_relu_grad_passes_dy_where_out_is_positive_and_dy_times_zero_elsewhere():
    # Long enough for the vectorised loop and its scalar tail; NaN and infinite gradients where
    # Out is 0 give NaN (dy * 0), as a multiply by the 0/1 derivative does.
    n = 37
    out = np.where(np.arange(n) % 3 == 0, 0.0, np.abs(RNG.standard_normal(n)) + 0.1)
    dy = RNG.standard_normal(n)
    dy[[0, 3, 4]] = [np.nan, np.inf, np.nan]  # Out is 0 at 0 and 3, positive at 4
    dy[6] = -0.0
    got = run_op(
        "relu_grad",
        {"Out": out.astype(np.float32), "Out@GRAD": dy.astype(np.float32)},
        ["X@GRAD"],
    )["X@GRAD"]
    with np.errstate(invalid="ignore"):
        want = (dy * (out > 0)).astype(np.float32)
    np.testing.assert_array_equal(got, want)
    assert np.isnan(got[[0, 3, 4]]).all()
    assert np.signbit(got[6])  # -0 * 0 is -0


def test_activation_keeps_lod():
    from fleet.testing.op_test import Seq

    x = RNG.standard_normal((5, 2)).astype(np.float32)
    out = run_op("relu", {"X": Seq(x, [[0, 2, 5]])}, ["Out"], raw=True)["Out"]
    assert out.lod() == [[0, 2, 5]]


def test_wrong_dtype_names_variable():
    with pytest.raises(InvalidArgument, match="X_0.*int64, expected float32"):
        run_op("relu", {"X": np.ones((2, 2), dtype=np.int64)}, ["Out"])
