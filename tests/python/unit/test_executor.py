"""Executor: feeds, fetches, LoD feeding, scope access, caching, and error messages."""

import numpy as np
import pytest

import fleet
from fleet import layers
from fleet.errors import InvalidArgument, NotFound


@pytest.fixture
def exe():
    return fleet.Executor(fleet.CPUPlace())


def test_feed_fetch_round_trip_and_scope_access(exe):
    main, startup = fleet.Program(), fleet.Program()
    scope = fleet._core.Scope()
    with fleet.program_guard(main, startup):
        x = layers.data("x", [3])
        y = layers.fc(
            x,
            2,
            bias_attr=False,
            param_attr=fleet.ParamAttr(name="w", initializer=fleet.initializer.Constant(0.5)),
        )
    exe.run(startup, scope=scope)
    w = scope.find_var("w").get_tensor()
    np.testing.assert_array_equal(np.array(w), np.full((3, 2), 0.5, np.float32))
    w.set(np.arange(6, dtype=np.float32).reshape(3, 2))
    data = np.array([[1, 2, 3]], np.float32)
    (out,) = exe.run(main, feed={"x": data}, fetch_list=[y], scope=scope)
    np.testing.assert_allclose(out, data @ np.arange(6).reshape(3, 2))


def test_global_scope_holds_parameters(exe):
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        layers.fc(layers.data("x", [3]), 2, param_attr="global_w")
    exe.run(startup)
    assert np.array(fleet.global_scope().find_var("global_w").get_tensor()).shape == (3, 2)


def test_lod_feed_with_lengths_and_offsets(exe):
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        ids = layers.data("ids", [1], dtype="int64", lod_level=1)
        emb = layers.embedding(
            ids,
            size=[10, 2],
            param_attr=fleet.ParamAttr(initializer=fleet.initializer.Constant(1.0)),
        )
        pooled = layers.sequence_pool(emb, "sum")
    scope = fleet._core.Scope()
    exe.run(startup, scope=scope)
    values = np.array([[1], [2], [3], [4], [5]], np.int64)
    for tensor in (
        fleet.LoDTensor(values, lengths=[[2, 3]]),
        fleet.LoDTensor(values, lod=[[0, 2, 5]]),
        fleet.create_lod_tensor(values, [[2, 3]]),
    ):
        (out,) = exe.run(main, feed={"ids": tensor}, fetch_list=[pooled], scope=scope)
        np.testing.assert_allclose(out, [[2, 2], [3, 3]])


def test_wrong_feed_shape_names_variable_and_both_shapes(exe):
    main = fleet.Program()
    with fleet.program_guard(main, fleet.Program()):
        x = layers.data("pixels", [4])
        layers.scale(x, 2.0)
    with pytest.raises(InvalidArgument, match=r"'pixels'.*\[2, 5\].*\[-1, 4\]"):
        exe.run(main, feed={"pixels": np.ones((2, 5), np.float32)})
    with pytest.raises(InvalidArgument, match=r"'pixels'.*int64.*float32"):
        exe.run(main, feed={"pixels": np.ones((2, 4), np.int64)})


def test_fetch_or_feed_of_missing_variable_is_named(exe):
    main = fleet.Program()
    with fleet.program_guard(main, fleet.Program()):
        layers.scale(layers.data("x", [1]), 2.0)
    with pytest.raises(NotFound, match="fetch 'nonexistent'"):
        exe.run(main, feed={"x": np.ones((1, 1), np.float32)}, fetch_list=["nonexistent"])
    with pytest.raises(NotFound, match="feed 'y'"):
        exe.run(main, feed={"y": np.ones((1, 1), np.float32)})


def test_runtime_kernel_error_names_op_and_script_line(exe):
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        a = layers.data("a", [-1], append_batch_size=False)
        b = layers.data("b", [-1], append_batch_size=False)
        out = layers.elementwise_add(a, b)
    with pytest.raises(InvalidArgument) as info:
        exe.run(
            main, feed={"a": np.ones(3, np.float32), "b": np.ones(4, np.float32)}, fetch_list=[out]
        )
    assert "elementwise_add" in str(info.value)
    assert "test_executor.py:" in str(info.value)


def test_reading_a_variable_before_startup_is_a_clear_error(exe):
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        y = layers.fc(layers.data("x", [3]), 2)
    with pytest.raises(InvalidArgument, match="fc_.*w.*no data"):
        exe.run(
            main, feed={"x": np.ones((1, 3), np.float32)}, fetch_list=[y], scope=fleet._core.Scope()
        )


def test_prepared_program_is_cached_and_refreshed_on_change(exe):
    main = fleet.Program()
    with fleet.program_guard(main, fleet.Program()):
        x = layers.data("x", [2])
        y = layers.scale(x, 3.0)
    feed = {"x": np.ones((1, 2), np.float32)}
    exe.run(main, feed=feed, fetch_list=[y])
    exe.run(main, feed=feed, fetch_list=[y])
    assert len(exe._cache) == 1
    with fleet.program_guard(main, fleet.Program()):
        z = layers.scale(y, 2.0)
    (out,) = exe.run(main, feed=feed, fetch_list=[z])
    np.testing.assert_allclose(out, [[6, 6]])
    assert len(exe._cache) == 2
