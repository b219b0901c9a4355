"""Every CUDA kernel against the CPU kernel of the same op, through the op-test harness: the
outputs on the same random inputs, and the analytic gradients (the registered grad ops run on
the device) for the same output weights. The CPU gradients are themselves checked against
finite differences by the CPU op tests, so agreement here checks the CUDA gradients too. All
tests skip without a CUDA device."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pytest

from fleet.testing.op_test import Rows, Seq, grads, run_op

pytestmark = pytest.mark.gpu


def _rand(rng: np.random.Generator, *shape: int, low: float = -1.0, high: float = 1.0):
    return rng.uniform(low, high, size=shape).astype(np.float32)


def _same_outputs(
    op: str,
    inputs: Mapping[str, Any],
    outputs: Sequence[str],
    attrs: Mapping[str, Any] | None,
    device: int,
    rtol: float = 1e-5,
    atol: float = 1e-6,
) -> dict[str, Any]:
    want = run_op(op, inputs, outputs, attrs)
    got = run_op(op, inputs, outputs, attrs, cuda_device=device)
    for slot in outputs:
        np.testing.assert_allclose(
            np.asarray(got[slot]), np.asarray(want[slot]), rtol=rtol, atol=atol, err_msg=slot
        )
    return got


def _same_grads(
    op: str,
    inputs: Mapping[str, Any],
    wrt: Sequence[str],
    attrs: Mapping[str, Any] | None,
    device: int,
    out_slots: Sequence[str] = ("Out",),
    rtol: float = 1e-5,
    atol: float = 1e-5,
) -> None:
    want = grads(op, inputs, wrt, attrs, out_slots)
    got = grads(op, inputs, wrt, attrs, out_slots, cuda_device=device)
    for slot in wrt:
        for i, (g, w) in enumerate(zip(got[slot], want[slot])):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"{op} d{slot}[{i}]")


@pytest.mark.parametrize("op", ["relu", "sigmoid", "tanh"])
def test_activations(cuda_device: int, op: str) -> None:
    rng = np.random.default_rng(0)
    x = {"X": _rand(rng, 37, 129, low=-3, high=3)}
    _same_outputs(op, x, ["Out"], None, cuda_device)
    _same_grads(op, x, ["X"], None, cuda_device)


def test_scale(cuda_device: int) -> None:
    rng = np.random.default_rng(1)
    for after in (True, False):
        attrs = {"scale": 2.5, "bias": -0.5, "bias_after_scale": after}
        _same_outputs("scale", {"X": _rand(rng, 7, 11)}, ["Out"], attrs, cuda_device)


@pytest.mark.parametrize(
    "x_shape,y_shape,axis",
    [((256, 1024), (1024,), 1), ((64, 33), (64, 33), -1), ((4, 5, 6), (5,), 1)],
)
def test_elementwise_add_with_bias_broadcast(
    cuda_device: int, x_shape: tuple, y_shape: tuple, axis: int
) -> None:
    rng = np.random.default_rng(2)
    inputs = {"X": _rand(rng, *x_shape), "Y": _rand(rng, *y_shape)}
    _same_outputs("elementwise_add", inputs, ["Out"], {"axis": axis}, cuda_device)
    _same_grads("elementwise_add", inputs, ["X", "Y"], {"axis": axis}, cuda_device, rtol=1e-4)


@pytest.mark.parametrize("m,k,n", [(256, 1024, 1024), (3, 5, 7), (1, 400, 2)])
def test_mul_through_cublas(cuda_device: int, m: int, k: int, n: int) -> None:
    rng = np.random.default_rng(3)
    inputs = {"X": _rand(rng, m, k), "Y": _rand(rng, k, n)}
    attrs = {"x_num_col_dims": 1, "y_num_col_dims": 1}
    _same_outputs("mul", inputs, ["Out"], attrs, cuda_device, rtol=1e-4, atol=1e-4)
    _same_grads("mul", inputs, ["X", "Y"], attrs, cuda_device, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("tx,ty", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_transposes_and_batches(cuda_device: int, tx: bool, ty: bool) -> None:
    rng = np.random.default_rng(4)
    x = _rand(rng, 3, 6, 4) if tx else _rand(rng, 3, 4, 6)
    y = _rand(rng, 3, 5, 6) if ty else _rand(rng, 3, 6, 5)
    attrs = {"transpose_X": tx, "transpose_Y": ty, "alpha": 0.5}
    inputs = {"X": x, "Y": y}
    _same_outputs("matmul", inputs, ["Out"], attrs, cuda_device, rtol=1e-4, atol=1e-5)
    _same_grads("matmul", inputs, ["X", "Y"], attrs, cuda_device, rtol=1e-4)


def test_matmul_with_a_shared_2d_y(cuda_device: int) -> None:
    rng = np.random.default_rng(5)
    inputs = {"X": _rand(rng, 2, 3, 8), "Y": _rand(rng, 8, 4)}
    _same_outputs("matmul", inputs, ["Out"], {}, cuda_device, rtol=1e-4, atol=1e-5)
    _same_grads("matmul", inputs, ["X", "Y"], {}, cuda_device, rtol=1e-4)


def test_softmax_and_softmax_with_cross_entropy(cuda_device: int) -> None:
    rng = np.random.default_rng(6)
    x = {"X": _rand(rng, 33, 70, low=-5, high=5)}
    _same_outputs("softmax", x, ["Out"], None, cuda_device)
    _same_grads("softmax", x, ["X"], None, cuda_device)
    logits = _rand(rng, 300, 2, low=-30, high=30)
    label = rng.integers(0, 2, size=(300, 1)).astype(np.int64)
    label[5] = -100  # ignore_index
    inputs = {"Logits": logits, "Label": label}
    _same_outputs(
        "softmax_with_cross_entropy", inputs, ["Softmax", "Loss"], None, cuda_device, atol=1e-5
    )
    _same_grads(
        "softmax_with_cross_entropy", inputs, ["Logits"], None, cuda_device, out_slots=("Loss",)
    )


def test_sigmoid_cross_entropy_with_logits(cuda_device: int) -> None:
    rng = np.random.default_rng(7)
    x = _rand(rng, 256, 1, low=-8, high=8)
    label = rng.integers(0, 2, size=(256, 1)).astype(np.float32)
    label[3] = -100.0
    for normalize in (False, True):
        attrs = {"normalize": normalize}
        inputs = {"X": x, "Label": label}
        _same_outputs("sigmoid_cross_entropy_with_logits", inputs, ["Out"], attrs, cuda_device)
        _same_grads("sigmoid_cross_entropy_with_logits", inputs, ["X"], attrs, cuda_device)


def test_mean_sum_and_cast(cuda_device: int) -> None:
    rng = np.random.default_rng(8)
    x = {"X": _rand(rng, 4096, 1)}
    _same_outputs("mean", x, ["Out"], None, cuda_device)
    _same_grads("mean", x, ["X"], None, cuda_device)
    parts = {"X": [_rand(rng, 5, 6), _rand(rng, 5, 6), _rand(rng, 5, 6)]}
    _same_outputs("sum", parts, ["Out"], None, cuda_device)
    ids = rng.integers(-50, 50, size=(9, 2)).astype(np.int64)
    for attrs in ({"in_dtype": 3, "out_dtype": 0}, {"in_dtype": 3, "out_dtype": 2}):
        _same_outputs("cast", {"X": ids}, ["Out"], attrs, cuda_device)


def test_concat_and_its_gradient(cuda_device: int) -> None:
    rng = np.random.default_rng(9)
    parts = [_rand(rng, 16, 10) for _ in range(26)] + [_rand(rng, 16, 13)]
    inputs = {"X": parts}
    _same_outputs("concat", inputs, ["Out"], {"axis": 1}, cuda_device)
    _same_grads("concat", inputs, ["X"], {"axis": 1}, cuda_device)
    rows = {"X": [_rand(rng, 3, 4), _rand(rng, 5, 4)]}
    _same_outputs("concat", rows, ["Out"], {"axis": 0}, cuda_device)


def test_reshape_shares_memory_on_the_device(cuda_device: int) -> None:
    rng = np.random.default_rng(10)
    inputs = {"X": _rand(rng, 8, 26, 10)}
    attrs = {"shape": [-1, 260]}
    _same_outputs("reshape", inputs, ["Out"], attrs, cuda_device)
    _same_grads("reshape", inputs, ["X"], attrs, cuda_device)


@pytest.mark.parametrize("padding_idx", [-1, 3])
def test_embedding_lookup_and_sparse_gradient(cuda_device: int, padding_idx: int) -> None:
    rng = np.random.default_rng(11)
    w = _rand(rng, 50, 10)
    ids = rng.integers(0, 50, size=(64, 1)).astype(np.int64)
    ids[:4] = 3  # duplicates, and the padding id when padding_idx == 3
    for is_sparse in (True, False):
        attrs = {"is_sparse": is_sparse, "padding_idx": padding_idx}
        inputs = {"W": w, "Ids": ids}
        _same_outputs("lookup_table", inputs, ["Out"], attrs, cuda_device)
        # The gradient made dense adds duplicate rows; padding rows contribute nothing.
        _same_grads("lookup_table", inputs, ["W"], attrs, cuda_device)


@pytest.mark.parametrize("pooltype", ["SUM", "AVERAGE", "SQRT"])
def test_sequence_pool_over_lod(cuda_device: int, pooltype: str) -> None:
    rng = np.random.default_rng(12)
    x = Seq(_rand(rng, 10, 6), [[0, 1, 4, 4, 10]])  # an empty sequence too
    attrs = {"pooltype": pooltype}
    _same_outputs("sequence_pool", {"X": x}, ["Out"], attrs, cuda_device)
    _same_grads("sequence_pool", {"X": x}, ["X"], attrs, cuda_device)


def _optimizer_inputs(rng: np.random.Generator, sparse: bool) -> dict[str, Any]:
    param = _rand(rng, 40, 8)
    if sparse:
        rows = [3, 7, 3, 39, 0]  # a duplicate row is summed before the update
        grad: Any = Rows(rows, _rand(rng, len(rows), 8), 40)
    else:
        grad = _rand(rng, 40, 8)
    return {"Param": param, "Grad": grad, "LearningRate": np.array([0.05], np.float32)}


@pytest.mark.parametrize("sparse", [False, True])
def test_sgd(cuda_device: int, sparse: bool) -> None:
    inputs = _optimizer_inputs(np.random.default_rng(13), sparse)
    _same_outputs("sgd", inputs, ["ParamOut"], None, cuda_device)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum(cuda_device: int, sparse: bool, nesterov: bool) -> None:
    rng = np.random.default_rng(14)
    inputs = _optimizer_inputs(rng, sparse)
    inputs["Velocity"] = _rand(rng, 40, 8, low=-0.1, high=0.1)
    attrs = {"mu": 0.9, "use_nesterov": nesterov}
    _same_outputs("momentum", inputs, ["ParamOut", "VelocityOut"], attrs, cuda_device)


@pytest.mark.parametrize("sparse,lazy", [(False, False), (True, False), (True, True)])
def test_adam(cuda_device: int, sparse: bool, lazy: bool) -> None:
    rng = np.random.default_rng(15)
    inputs = _optimizer_inputs(rng, sparse)
    inputs["Moment1"] = _rand(rng, 40, 8, low=-0.1, high=0.1)
    inputs["Moment2"] = _rand(rng, 40, 8, low=0.0, high=0.1)
    inputs["Beta1Pow"] = np.array([0.9**3], np.float32)
    inputs["Beta2Pow"] = np.array([0.999**3], np.float32)
    outs = ["ParamOut", "Moment1Out", "Moment2Out", "Beta1PowOut", "Beta2PowOut"]
    attrs = {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "lazy_mode": lazy}
    _same_outputs("adam", inputs, outs, attrs, cuda_device, rtol=1e-5, atol=1e-6)
