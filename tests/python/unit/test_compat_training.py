"""Small Paddle-style networks built from the issue-24 surface train in one process, and train
the same way twice with the same seeds: the CBOW word2vec of fluid.layers.nce's documentation
(shared sparse embeddings, nce with a custom noise distribution), an MLP with exponential_decay
and RMSProp, and a regression with each new optimizer."""

import numpy as np
import pytest

import fleet
from fleet import layers

VOCAB, WINDOW, BATCH = 40, 5, 64


def _corpus(rng: np.random.Generator, length: int = 6000) -> np.ndarray:
    """A Markov chain over the vocabulary: the next word is w + 1 (mod VOCAB) four times in
    five, else any word; the centre of a window is thus predictable from its context."""
    words = [0]
    for _ in range(length - 1):
        nxt = (words[-1] + 1) % VOCAB if rng.random() < 0.8 else int(rng.integers(VOCAB))
        words.append(nxt)
    return np.array(words, np.int64)


def _train_word2vec(steps: int) -> list[float]:
    rng = np.random.default_rng(0)
    corpus = _corpus(rng)
    unigram = np.bincount(corpus, minlength=VOCAB) ** 0.75
    main, startup = fleet.Program(), fleet.Program()
    main.random_seed = startup.random_seed = 1
    with fleet.program_guard(main, startup):
        words = [layers.data(f"word_{i}", [1], dtype="int64") for i in range(WINDOW)]
        label_word = WINDOW // 2
        embs = [
            layers.embedding(words[i], size=[VOCAB, 16], param_attr="embed", is_sparse=True)
            for i in range(WINDOW)
            if i != label_word
        ]
        loss = layers.nce(
            input=layers.concat(embs, axis=1),
            label=words[label_word],
            num_total_classes=VOCAB,
            param_attr="nce.w_0",
            bias_attr="nce.b_0",
            num_neg_samples=5,
            sampler="custom_dist",
            custom_dist=unigram / unigram.sum(),
            seed=3,
            is_sparse=True,
        )
        avg_loss = layers.mean(loss)
        fleet.optimizer.Adagrad(0.2).minimize(avg_loss)
    exe = fleet.Executor(fleet.CPUPlace())
    scope = fleet._core.Scope()
    exe.run(startup, scope=scope)
    losses = []
    for _ in range(steps):
        starts = rng.integers(0, len(corpus) - WINDOW, size=BATCH)
        windows = corpus[starts[:, None] + np.arange(WINDOW)]
        feed = {f"word_{i}": windows[:, i : i + 1] for i in range(WINDOW)}
        (value,) = exe.run(main, feed=feed, fetch_list=[avg_loss], scope=scope)
        losses.append(float(value.reshape(-1)[0]))
    return losses


def test_word2vec_with_nce_learns_and_is_deterministic():
    losses = _train_word2vec(80)
    assert np.mean(losses[-10:]) < 0.7 * np.mean(losses[:10]), losses
    assert _train_word2vec(80) == losses


def _train_mlp(optimizer_factory, steps: int, with_decay: bool):
    rng = np.random.default_rng(2)
    teacher = rng.standard_normal((8, 3))
    main, startup = fleet.Program(), fleet.Program()
    main.random_seed = startup.random_seed = 4
    with fleet.program_guard(main, startup):
        x = layers.data("x", [8])
        label = layers.data("label", [1], dtype="int64")
        hidden = layers.fc(x, 16, act="relu")
        prob = layers.fc(hidden, 3, act="softmax")
        loss = layers.mean(layers.cross_entropy(prob, label))
        acc = layers.accuracy(prob, label)
        lr = layers.exponential_decay(0.01, decay_steps=10, decay_rate=0.5) if with_decay else 0.01
        optimizer_factory(lr).minimize(loss)
    exe = fleet.Executor(fleet.CPUPlace())
    scope = fleet._core.Scope()
    exe.run(startup, scope=scope)
    fetch = [loss, acc] + ([lr] if with_decay else [])
    history = []
    for _ in range(steps):
        xs = rng.standard_normal((BATCH, 8)).astype(np.float32)
        labels = np.argmax(xs @ teacher, axis=1).reshape(-1, 1).astype(np.int64)
        history.append(
            exe.run(main, feed={"x": xs, "label": labels}, fetch_list=fetch, scope=scope)
        )
    return history


def test_mlp_with_exponential_decay_and_rmsprop_learns_while_the_rate_decays():
    def rmsprop(lr):
        return fleet.optimizer.RMSPropOptimizer(lr, momentum=0.5, centered=True)

    history = _train_mlp(rmsprop, 60, with_decay=True)
    losses = [float(h[0].reshape(-1)[0]) for h in history]
    rates = [float(h[2][0]) for h in history]
    assert np.mean(losses[-5:]) < 0.6 * np.mean(losses[:5]), losses
    assert float(history[-1][1][0]) > 0.7  # accuracy on the last batch
    np.testing.assert_allclose(rates, [0.01 * 0.5 ** (s / 10) for s in range(60)], rtol=1e-5)
    again = _train_mlp(rmsprop, 60, with_decay=True)
    assert [float(h[0].reshape(-1)[0]) for h in again] == losses


@pytest.mark.parametrize(
    "factory",
    [
        lambda lr: fleet.optimizer.RMSProp(lr),
        lambda lr: fleet.optimizer.FtrlOptimizer(lr * 10, l1=1e-4, l2=1e-4),
        lambda lr: fleet.optimizer.AdamaxOptimizer(lr),
        lambda lr: fleet.optimizer.LambOptimizer(lr, lamb_weight_decay=0.0),
        lambda lr: fleet.optimizer.DecayedAdagradOptimizer(lr * 10),
    ],
    ids=["rmsprop", "ftrl", "adamax", "lamb", "decayed_adagrad"],
)
def test_each_new_optimizer_trains_an_mlp(factory):
    history = _train_mlp(factory, 40, with_decay=False)
    losses = [float(h[0].reshape(-1)[0]) for h in history]
    assert np.mean(losses[-5:]) < 0.8 * np.mean(losses[:5]), losses
