"""nce against a NumPy version of its cost (true and noise classes, bias, sample weights, several
true labels), its gradients by finite differences (dense and sparse weight gradients), and its
three noise samplers' frequencies against their distributions."""

import numpy as np
import pytest

from fleet.errors import InvalidArgument
from fleet.layers.nce import alias_tables
from fleet.testing.op_test import check_grad, run_op

RNG = np.random.default_rng(31)
CLASSES, DIM, BATCH = 8, 3, 4
OUTS = ["Cost", "SampleLogits", "SampleLabels"]


def _inputs(num_true=1, bias=True, sample_weight=False):
    inputs = {
        "Input": RNG.standard_normal((BATCH, DIM)).astype(np.float32),
        "Label": RNG.integers(0, CLASSES, size=(BATCH, num_true)).astype(np.int64),
        "Weight": (0.5 * RNG.standard_normal((CLASSES, DIM))).astype(np.float32),
    }
    if bias:
        inputs["Bias"] = (0.1 * RNG.standard_normal((CLASSES, 1))).astype(np.float32)
    if sample_weight:
        inputs["SampleWeight"] = RNG.uniform(0.5, 2.0, size=(BATCH, 1)).astype(np.float32)
    return inputs


def nce_ref(inputs, negatives, num_neg):
    x, w, labels = (inputs[k].astype(np.float64) for k in ("Input", "Weight", "Label"))
    bias = inputs.get("Bias", np.zeros((CLASSES, 1))).astype(np.float64)[:, 0]
    b = num_neg / CLASSES  # uniform noise
    costs = []
    for i in range(BATCH):
        classes = [int(c) for c in labels[i]] + list(negatives)
        total = 0.0
        for j, c in enumerate(classes):
            o = 1 / (1 + np.exp(-(x[i] @ w[c] + bias[c])))
            total += -np.log(o / (o + b)) if j < labels.shape[1] else -np.log(b / (o + b))
        costs.append(total * (inputs["SampleWeight"][i, 0] if "SampleWeight" in inputs else 1.0))
    return np.array(costs).reshape(-1, 1)


@pytest.mark.parametrize(
    "num_true,bias,sample_weight", [(1, True, False), (2, True, True), (1, False, False)]
)
def test_nce_cost_matches_numpy(num_true, bias, sample_weight):
    inputs = _inputs(num_true, bias, sample_weight)
    negatives = [1, 5, 6]
    attrs = {"num_total_classes": CLASSES, "num_neg_samples": 3, "custom_neg_classes": negatives}
    outs = run_op("nce", inputs, OUTS, attrs)
    np.testing.assert_allclose(outs["Cost"], nce_ref(inputs, negatives, 3), rtol=1e-5)
    labels = outs["SampleLabels"]
    assert labels.shape == (BATCH, num_true + 3)
    np.testing.assert_array_equal(labels[:, :num_true], inputs["Label"])
    np.testing.assert_array_equal(labels[:, num_true:], np.tile(negatives, (BATCH, 1)))
    assert ((outs["SampleLogits"] > 0) & (outs["SampleLogits"] < 1)).all()


@pytest.mark.parametrize("is_sparse", [False, True])
def test_nce_gradients(is_sparse):
    attrs = {
        "num_total_classes": CLASSES,
        "num_neg_samples": 3,
        "custom_neg_classes": [2, 2, 7],
        "is_sparse": is_sparse,
    }
    check_grad(
        "nce",
        _inputs(num_true=2, sample_weight=True),
        wrt=["Input", "Weight", "Bias"],
        attrs=attrs,
        out_slots=["Cost"],
        aux_slots=["SampleLogits", "SampleLabels"],
    )


def _negatives(sampler, extra=None, batch=4000, num_neg=5, classes=CLASSES):
    inputs = {
        "Input": np.zeros((batch, DIM), np.float32),
        "Label": np.zeros((batch, 1), np.int64),
        "Weight": np.zeros((classes, DIM), np.float32),
        **(extra or {}),
    }
    attrs = {"num_total_classes": classes, "num_neg_samples": num_neg, "sampler": sampler}
    labels = run_op("nce", inputs, OUTS, {**attrs, "seed": 3})["SampleLabels"][:, 1:]
    counts = np.bincount(labels.reshape(-1), minlength=classes)
    return counts / counts.sum()


def test_uniform_sampler_draws_every_class_equally():
    freq = _negatives(0)
    np.testing.assert_allclose(freq, np.full(CLASSES, 1 / CLASSES), atol=0.01)


def test_log_uniform_sampler_follows_zipf():
    freq = _negatives(1)
    c = np.arange(CLASSES)
    want = np.log((c + 2) / (c + 1)) / np.log(CLASSES + 1)
    np.testing.assert_allclose(freq, want / want.sum(), atol=0.01)


def test_custom_sampler_follows_the_given_probabilities():
    probs = np.array([0.3, 0.05, 0.05, 0.2, 0.1, 0.1, 0.15, 0.05])
    alias, accept = alias_tables(probs)
    extra = {
        "CustomDistProbs": probs.astype(np.float32),
        "CustomDistAlias": alias,
        "CustomDistAliasProbs": accept,
    }
    np.testing.assert_allclose(_negatives(2, extra), probs, atol=0.01)


def test_nce_errors_name_the_class_and_the_missing_tables():
    inputs = _inputs()
    inputs["Label"][2, 0] = CLASSES
    with pytest.raises(InvalidArgument, match=r"class 8 \(sample 2\) is outside"):
        run_op("nce", inputs, OUTS, {"num_total_classes": CLASSES, "num_neg_samples": 2})
    with pytest.raises(InvalidArgument, match="custom sampler needs CustomDistProbs"):
        run_op("nce", _inputs(), OUTS, {"num_total_classes": CLASSES, "sampler": 2})
