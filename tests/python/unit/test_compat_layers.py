"""The fluid surface of issue 24 in one process: Variable operators, the layers Paddle scripts
use (shapes at build time, values at run time), learning-rate schedules stepping with the runs,
initializers' fan rules, the new optimizers training, and accuracy's one-column error."""

import math

import numpy as np
import pytest

import fleet
from fleet import initializer, layers
from fleet.errors import InvalidArgument
from fleet.layers.learning_rate_scheduler import LR_COUNTER_NAME


@pytest.fixture
def exe():
    return fleet.Executor(fleet.CPUPlace())


def _run(exe, build, feed, scope=None):
    """Builds `build()` (returning a list of variables) in fresh programs, runs the startup and
    the main program once, and returns the fetched values."""
    main, startup = fleet.Program(), fleet.Program()
    main.random_seed = startup.random_seed = 5
    with fleet.program_guard(main, startup):
        fetch = build()
    scope = scope or fleet._core.Scope()
    exe.run(startup, scope=scope)
    return exe.run(main, feed=feed, fetch_list=fetch, scope=scope)


X = np.array([[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]], np.float32)
Y = np.array([[2.0, -2.0, 1.0], [1.0, 1.0, 1.0]], np.float32)


def test_variable_arithmetic_with_numbers_and_variables(exe):
    def build():
        x, y = layers.data("x", [3]), layers.data("y", [3])
        return [x + y, x - 2, 2 - x, x * y, x / 4, 1 / y, -x, x * 3 + 1, x - y, x / y, 2 * x]

    got = _run(exe, build, {"x": X, "y": Y})
    want = [X + Y, X - 2, 2 - X, X * Y, X / 4, 1 / Y, -X, X * 3 + 1, X - Y, X / Y, 2 * X]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_variable_arithmetic_broadcasts_a_row_and_works_on_int64(exe):
    def build():
        x = layers.data("x", [3])
        row = layers.assign(np.array([1.0, 2.0, 3.0], np.float32))
        ids = layers.data("ids", [1], dtype="int64")
        return [x + row, x * row, ids + 1, ids * 2, -ids]

    ids = np.array([[3], [7]], np.int64)
    got = _run(exe, build, {"x": X, "ids": ids})
    row = np.array([1.0, 2.0, 3.0], np.float32)
    np.testing.assert_allclose(got[0], X + row)
    np.testing.assert_allclose(got[1], X * row)
    assert got[2].dtype == np.int64 and got[2].tolist() == (ids + 1).tolist()
    assert got[3].tolist() == (ids * 2).tolist() and got[4].tolist() == (-ids).tolist()


def test_variable_comparisons_give_bool_variables(exe):
    def build():
        x, y = layers.data("x", [3]), layers.data("y", [3])
        return [x < y, x <= y, x > y, x >= y, x == y, x != y, x > 0.5, 1.0 < x]

    got = _run(exe, build, {"x": X, "y": Y})
    want = [X < Y, X <= Y, X > Y, X >= Y, X == Y, X != Y, X > 0.5, X > 1.0]
    for g, w in zip(got, want):
        assert g.dtype == np.bool_
        np.testing.assert_array_equal(g, w)


def test_variables_stay_hashable_and_have_astype_and_shape(exe):
    main = fleet.Program()
    with fleet.program_guard(main, fleet.Program()):
        x = layers.data("x", [3])
        assert {x: 1}[x] == 1 and x in {x}
        assert x.shape == (-1, 3)
        as_int = x.astype("int64")
    assert as_int.dtype == fleet._dtypes.INT64 and as_int.shape == (-1, 3)
    assert [op.type for op in main.global_block().ops] == ["cast"]


def test_the_gradient_flows_through_variable_operators(exe):
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        x = layers.data("x", [3])
        h = layers.fc(x, 3, bias_attr=False, param_attr="w")
        loss = layers.mean((h * 2 - 1) / 4)
        fleet.optimizer.SGD(0.1).minimize(loss)
    scope = fleet._core.Scope()
    exe.run(startup, scope=scope)
    before = np.array(scope.find_var("w").get_tensor())
    exe.run(main, feed={"x": X}, fetch_list=[loss], scope=scope)
    after = np.array(scope.find_var("w").get_tensor())
    # d loss / d w = (2 / 4) * mean over the 6 outputs' x: column sums of X / 6 per column.
    grad = 0.5 * np.tile(X.sum(axis=0, keepdims=True).T, (1, 3)) / 6
    np.testing.assert_allclose(before - after, 0.1 * grad, rtol=1e-5)


def test_rearranging_layers_have_their_shapes_at_build_time_and_values_at_run_time(exe):
    shapes = {}

    def build():
        x = layers.data("x", [3])  # [-1, 3]
        outs = {
            "transpose": layers.transpose(x, [1, 0]),
            "expand": layers.expand(x, [2, 2]),
            "slice": layers.slice(x, axes=[1], starts=[1], ends=[3]),
            "unsqueeze": layers.unsqueeze(x, [1]),
            "squeeze": layers.squeeze(layers.unsqueeze(x, [2]), [2]),
            "clip": layers.clip(x, -1.0, 1.0),
            "l2_normalize": layers.l2_normalize(x, axis=1),
            "one_hot": layers.one_hot(layers.data("ids", [1], dtype="int64"), depth=5),
            "fill_like": layers.fill_constant_batch_size_like(x, [-1, 2], "float32", 0.5),
        }
        values, indices = layers.topk(x, k=2)
        outs["topk"], outs["topk_indices"] = values, indices
        shapes.update({k: v.shape for k, v in outs.items()})
        return list(outs.values())

    ids = np.array([[4], [0]], np.int64)
    got = dict(
        zip(
            [
                "transpose",
                "expand",
                "slice",
                "unsqueeze",
                "squeeze",
                "clip",
                "l2_normalize",
                "one_hot",
                "fill_like",
                "topk",
                "topk_indices",
            ],
            _run(exe, build, {"x": X, "ids": ids}),
        )
    )
    assert shapes["transpose"] == (3, -1) and shapes["expand"] == (-1, 6)
    assert shapes["slice"] == (-1, 2) and shapes["unsqueeze"] == (-1, 1, 3)
    assert shapes["squeeze"] == (-1, 3) and shapes["one_hot"] == (-1, 5)
    assert shapes["fill_like"] == (-1, 2) and shapes["topk"] == (-1, 2)
    np.testing.assert_array_equal(got["transpose"], X.T)
    np.testing.assert_array_equal(got["expand"], np.tile(X, (2, 2)))
    np.testing.assert_array_equal(got["slice"], X[:, 1:3])
    np.testing.assert_array_equal(got["unsqueeze"], X[:, None, :])
    np.testing.assert_array_equal(got["squeeze"], X)
    np.testing.assert_array_equal(got["clip"], np.clip(X, -1, 1))
    norm = np.sqrt((X.astype(np.float64) ** 2).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(got["l2_normalize"], X / norm, rtol=1e-6)
    np.testing.assert_array_equal(got["one_hot"], np.eye(5)[[4, 0]])
    np.testing.assert_array_equal(got["fill_like"], np.full((2, 2), 0.5))
    np.testing.assert_array_equal(got["topk"], -np.sort(-X, axis=1)[:, :2])
    np.testing.assert_array_equal(got["topk_indices"], np.argsort(-X, axis=1)[:, :2])


def test_assign_create_tensor_and_a_persistable_global_var(exe):
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        x = layers.data("x", [3])
        copy = layers.create_tensor("float32")
        layers.assign(x, copy)
        table = layers.assign(np.array([[1, 2], [3, 4]], np.int64))
        total = layers.create_global_var([1], 10.0, "float32", persistable=True, name="total")
        layers.assign(total + 1.0, total)
    scope = fleet._core.Scope()
    exe.run(startup, scope=scope)
    for step in range(3):
        got_copy, got_table, got_total = exe.run(
            main, feed={"x": X}, fetch_list=[copy, table, total], scope=scope
        )
        np.testing.assert_array_equal(got_copy, X)
        assert got_table.tolist() == [[1, 2], [3, 4]]
        assert got_total.tolist() == [11.0 + step]


def _lr_values(exe, build, runs):
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        lrs = build()
    scope = fleet._core.Scope()
    exe.run(startup, scope=scope)
    return main, [exe.run(main, fetch_list=lrs, scope=scope) for _ in range(runs)]


def test_schedules_step_once_per_run_and_share_one_counter(exe):
    def build():
        return [
            layers.exponential_decay(0.1, decay_steps=2, decay_rate=0.5),
            layers.piecewise_decay([2, 4], [1.0, 0.5, 0.1]),
            layers.polynomial_decay(0.1, decay_steps=4, end_learning_rate=0.0, power=1.0),
            layers.cosine_decay(0.1, step_each_epoch=1, epochs=4),
        ]

    main, values = _lr_values(exe, build, 6)
    for step, (exp, piece, poly, cos) in enumerate(values):
        np.testing.assert_allclose(exp, [0.1 * 0.5 ** (step / 2)], rtol=1e-6)
        np.testing.assert_allclose(piece, [[1.0, 0.5, 0.1][(step >= 2) + (step >= 4)]])
        np.testing.assert_allclose(poly, [0.1 * (1 - min(step, 4) / 4)], atol=1e-7)
        np.testing.assert_allclose(cos, [0.05 * (math.cos(step * math.pi / 4) + 1)], atol=1e-7)
    ops = [op.type for op in main.global_block().ops]
    assert ops[0] == "increment" and ops.count("increment") == 1
    assert main.global_block().var(LR_COUNTER_NAME).persistable


def test_noam_decay_counts_from_one(exe):
    _, values = _lr_values(exe, lambda: [layers.noam_decay(64, warmup_steps=3)], 4)
    for run, (lr,) in enumerate(values):
        step = run + 1
        want = 64**-0.5 * min(step**-0.5, step * 3**-1.5)
        np.testing.assert_allclose(lr, [want], rtol=1e-6)


def test_schedule_arguments_are_checked_when_built():
    with fleet.program_guard(fleet.Program(), fleet.Program()):
        with pytest.raises(InvalidArgument, match="decay_steps must be positive"):
            layers.exponential_decay(0.1, decay_steps=0, decay_rate=0.5)
        with pytest.raises(InvalidArgument, match="one entry more than boundaries"):
            layers.piecewise_decay([1, 2], [0.1, 0.2])


def test_accuracy_on_one_column_says_it_needs_a_column_per_class():
    with fleet.program_guard(fleet.Program(), fleet.Program()):
        prob = layers.fc(layers.data("x", [3]), 1, act="sigmoid")
        label = layers.data("label", [1], dtype="int64")
        with pytest.raises(InvalidArgument, match="needs one column per class"):
            layers.accuracy(prob, label)


# ---- initializers ----------------------------------------------------------------------------


def _init_values(exe, init, shape):
    main, startup = fleet.Program(), fleet.Program()
    startup.random_seed = 11
    with fleet.program_guard(main, startup):
        layers.create_global_var([1], 0.0, "float32")  # startup program not empty of others
        block = startup.global_block()
        var = block.create_var("p", shape=shape, dtype="float32", persistable=True)
        init(var, block)
    scope = fleet._core.Scope()
    exe.run(startup, scope=scope)
    return np.array(scope.find_var("p").get_tensor()), startup.global_block().ops[-1]


def test_fans_follow_paddles_rule():
    assert initializer.compute_fans(()) == (1, 1)
    assert initializer.compute_fans((7,)) == (7, 7)
    assert initializer.compute_fans((4, 6)) == (4, 6)
    assert initializer.compute_fans((8, 3, 5, 5)) == (75, 200)  # conv filter [out, in, kh, kw]


@pytest.mark.parametrize(
    "init,shape,kind,bound",
    [
        (initializer.Xavier(), (8, 3, 2, 2), "uniform", math.sqrt(6 / (12 + 32))),
        (initializer.Xavier(uniform=False), (40, 60), "normal", math.sqrt(2 / 100)),
        (initializer.MSRA(), (30, 20), "uniform", math.sqrt(6 / 30)),
        (initializer.MSRA(uniform=False), (6, 5, 3), "normal", math.sqrt(2 / 15)),
        (initializer.MSRA(fan_in=50), (30, 20), "uniform", math.sqrt(6 / 50)),
    ],
)
def test_xavier_and_msra_scales(exe, init, shape, kind, bound):
    values, op = _init_values(exe, init, list(shape))
    if kind == "uniform":
        assert op.type == "uniform_random"
        assert op.attrs["max"] == pytest.approx(bound) and op.attrs["min"] == pytest.approx(-bound)
        assert np.abs(values).max() <= bound
    else:
        assert op.type == "gaussian_random" and op.attrs["std"] == pytest.approx(bound)


def test_truncated_normal_stays_within_two_std(exe):
    values, op = _init_values(exe, initializer.TruncatedNormal(loc=0.5, scale=0.1), [50, 40])
    assert op.type == "truncated_gaussian_random"
    assert values.min() >= 0.3 - 1e-6 and values.max() <= 0.7 + 1e-6
    assert abs(values.mean() - 0.5) < 0.01


def test_lod_tensor_set_takes_paddles_place_argument():
    scope = fleet._core.Scope()
    tensor = scope.var("x").get_tensor()
    tensor.set(X, fleet.CPUPlace())
    np.testing.assert_array_equal(tensor.numpy(), X)
    tensor.set(Y, place=fleet.CPUPlace())
    np.testing.assert_array_equal(np.array(tensor), Y)
