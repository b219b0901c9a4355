"""End-to-end training on the Executor: known answers the model must find."""

import numpy as np
import pytest

import fleet
from fleet import layers


def _auc(labels, scores):
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    pos = labels == 1
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return (ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def test_linear_regression_converges_to_known_weights():
    rng = np.random.default_rng(0)
    true_w = np.array([[2.0], [-3.0], [0.5], [1.5]], np.float32)
    true_b = 0.7
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        x = layers.data("x", [4])
        y = layers.data("y", [1])
        pred = layers.fc(x, 1, param_attr="w", bias_attr="b")
        loss = layers.mean(
            layers.elementwise_mul(layers.elementwise_sub(pred, y), layers.elementwise_sub(pred, y))
        )
        fleet.optimizer.SGD(0.1).minimize(loss)
    scope = fleet._core.Scope()
    exe = fleet.Executor()
    exe.run(startup, scope=scope)
    for _ in range(300):
        xs = rng.standard_normal((64, 4)).astype(np.float32)
        ys = (xs @ true_w + true_b).astype(np.float32)
        (last,) = exe.run(main, feed={"x": xs, "y": ys}, fetch_list=[loss], scope=scope)
    w = np.array(scope.find_var("w").get_tensor())
    b = np.array(scope.find_var("b").get_tensor())
    np.testing.assert_allclose(w, true_w, atol=1e-3)
    np.testing.assert_allclose(b, [true_b], atol=1e-3)
    assert last[0] < 1e-5


@pytest.mark.parametrize(
    "optimizer",
    [
        lambda: fleet.optimizer.Adam(0.01),
        lambda: fleet.optimizer.Adam(0.01, lazy_mode=True),
        lambda: fleet.optimizer.Adagrad(0.1),
        lambda: fleet.optimizer.SGD(0.5),
        lambda: fleet.optimizer.Momentum(0.1, momentum=0.9),
    ],
)
def test_sparse_embedding_classifier_learns_a_rule(optimizer):
    """Label = 1 iff the two ids of a sample are in the same 'colour' (id % 3); only an
    embedding + hidden layer can represent the interaction."""
    rng = np.random.default_rng(1)
    vocab = 30
    main, startup = fleet.Program(), fleet.Program()
    startup.random_seed = 11
    with fleet.program_guard(main, startup):
        a = layers.data("a", [1], dtype="int64", lod_level=1)
        b = layers.data("b", [1], dtype="int64", lod_level=1)
        label = layers.data("label", [1], dtype="int64")
        attr = fleet.ParamAttr("emb", initializer=fleet.initializer.Uniform(-0.5, 0.5))
        ea = layers.sequence_pool(
            layers.embedding(a, [vocab, 8], is_sparse=True, param_attr=attr), "sum"
        )
        eb = layers.sequence_pool(
            layers.embedding(b, [vocab, 8], is_sparse=True, param_attr=attr), "sum"
        )
        hidden = layers.fc(layers.concat([ea, eb], axis=1), 32, act="relu")
        prob = layers.fc(hidden, 2, act="softmax")
        loss = layers.mean(layers.cross_entropy(prob, label))
        acc = layers.accuracy(prob, label)
        optimizer().minimize(loss)
    test_program = main.clone(for_test=True)

    def batch(n):
        ia = rng.integers(0, vocab, size=(n, 1))
        ib = rng.integers(0, vocab, size=(n, 1))
        lab = ((ia % 3) == (ib % 3)).astype(np.int64)
        return {"a": ia.astype(np.int64), "b": ib.astype(np.int64), "label": lab}

    scope = fleet._core.Scope()
    exe = fleet.Executor()
    exe.run(startup, scope=scope)
    for _ in range(600):
        exe.run(main, feed=batch(64), fetch_list=[loss], scope=scope)
    feed = batch(2000)
    probs, accuracy = exe.run(test_program, feed=feed, fetch_list=[prob, acc], scope=scope)
    assert _auc(feed["label"][:, 0], probs[:, 1]) > 0.97
    assert accuracy[0] > 0.9
