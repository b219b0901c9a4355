"""The fluid entry points a Paddle script reaches, ported by `import fleet as fluid`: fluid.data,
fluid.embedding, fluid.io (variables, parameters, persistables, inference models), fluid.core,
fluid.memory_optimize, and a named AttributeError for every Paddle name Fleet lacks."""

from __future__ import annotations

import numpy as np
import pytest

import fleet as fluid
from fleet import errors
from tests.python.compat import jobs


@pytest.fixture
def fresh_programs():
    """A new default main/startup program pair and a new global scope for the test."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.scope_guard(fluid.core.Scope()):
        yield main, startup


def _regression(main):
    """fluid.data (2.x shapes) + fc + square error + SGD, written as a 1.8/2.x user writes it."""
    x = fluid.data(name="x", shape=[None, 4], dtype="float32")
    y = fluid.data(name="y", shape=[None, 1], dtype="float32")
    pred = fluid.layers.fc(input=x, size=1)
    diff = fluid.layers.elementwise_sub(pred, y)
    loss = fluid.layers.mean(fluid.layers.elementwise_mul(diff, diff))
    fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
    return x, y, pred, loss


def _batches(steps, seed=0):
    rng = np.random.default_rng(seed)
    w = np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32)
    for _ in range(steps):
        xs = rng.standard_normal((32, 4)).astype(np.float32)
        yield {"x": xs, "y": xs @ w + 0.25}


def test_fluid_data_takes_none_as_batch_dimension(fresh_programs):
    x = fluid.data(name="x", shape=[None, 13], dtype="float32")
    ids = fluid.data(name="ids", shape=[None, 1], dtype="int64", lod_level=1)
    assert x.shape == (-1, 13)
    assert ids.shape == (-1, 1) and ids.lod_level == 1


def test_fluid_embedding_keeps_the_id_shape(fresh_programs):
    """fluid.embedding (1.8) maps ids [N, K] to [N, K, dim] (fluid.layers.embedding needs a
    trailing 1 and drops it)."""
    main, startup = fresh_programs
    ids = fluid.data(name="ids", shape=[None, 3], dtype="int64")
    emb = fluid.embedding(input=ids, size=[10, 4], param_attr=fluid.ParamAttr(name="emb_w"))
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    feed = np.array([[1, 2, 3], [4, 5, 6]], np.int64)
    (out,) = exe.run(main, feed={"ids": feed}, fetch_list=[emb])
    table = np.array(fluid.global_scope().find_var("emb_w").get_tensor())
    assert out.shape == (2, 3, 4)
    np.testing.assert_array_equal(out, table[feed])


@pytest.mark.parametrize("filename", [None, "__all__"])
@pytest.mark.parametrize("pair", ["persistables", "params"])
def test_io_save_and_load_restores_training_state(tmp_path, fresh_programs, pair, filename):
    """save_X then more training then load_X: the values are back to those saved."""
    main, startup = fresh_programs
    _, _, _, loss = _regression(main)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    for feed in _batches(5):
        exe.run(main, feed=feed, fetch_list=[loss])
    save = getattr(fluid.io, f"save_{pair}")
    load = getattr(fluid.io, f"load_{pair}")
    save(exe, str(tmp_path / "ckpt"), main, filename=filename)
    names = [p.name for p in main.all_parameters()]
    saved = {n: np.array(fluid.global_scope().find_var(n).get_tensor()) for n in names}
    for feed in _batches(5, seed=1):
        exe.run(main, feed=feed, fetch_list=[loss])
    assert any(
        not np.array_equal(saved[n], np.array(fluid.global_scope().find_var(n).get_tensor()))
        for n in names
    )
    load(exe, str(tmp_path / "ckpt"), main, filename=filename)
    for n in names:
        np.testing.assert_array_equal(
            saved[n], np.array(fluid.global_scope().find_var(n).get_tensor())
        )
    if filename is None:  # as Paddle: one file per variable, named by it
        assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == sorted(
            names if pair == "params" else [v.name for v in main.list_vars() if v.persistable]
        )


def test_io_save_vars_and_load_vars_of_named_variables(tmp_path, fresh_programs):
    main, startup = fresh_programs
    _regression(main)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    param = main.all_parameters()[0]
    fluid.io.save_vars(exe, str(tmp_path), main, vars=[param])
    before = np.array(fluid.global_scope().find_var(param.name).get_tensor())
    fluid.global_scope().find_var(param.name).get_tensor().set(np.zeros_like(before))
    fluid.io.load_vars(exe, str(tmp_path), main, vars=[param])
    np.testing.assert_array_equal(
        before, np.array(fluid.global_scope().find_var(param.name).get_tensor())
    )
    with pytest.raises(errors.NotFound, match="no saved value of 'nope'"):
        fluid.io.load_vars(exe, str(tmp_path), main, vars=["nope"])


def test_io_inference_model_round_trip_and_fleet_reads_it(tmp_path, fresh_programs):
    main, startup = fresh_programs
    x, _, pred, loss = _regression(main)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    for feed in _batches(20):
        exe.run(main, feed=feed, fetch_list=[loss])
    probe = next(_batches(1, seed=7))
    (expected,) = exe.run(main.clone(for_test=True), feed=probe, fetch_list=[pred])
    targets = fluid.io.save_inference_model(str(tmp_path / "m"), ["x"], [pred], exe)
    assert targets == [pred.name]
    for load in (fluid.io.load_inference_model, fluid.load_inference_model):
        with fluid.scope_guard(fluid.core.Scope()):
            result = load(str(tmp_path / "m"), exe)
            program, feed_names, fetch_targets = result[0], result[1], result[2]
            assert feed_names == ["x"]
            (got,) = exe.run(program, feed={"x": probe["x"]}, fetch_list=fetch_targets)
        np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_io_inference_model_with_paddle_file_names(tmp_path, fresh_programs):
    main, startup = fresh_programs
    _, _, pred, _ = _regression(main)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    fluid.io.save_inference_model(
        str(tmp_path), ["x"], [pred], exe, model_filename="__model__", params_filename="__params__"
    )
    assert (tmp_path / "__params__").is_file()
    with fluid.scope_guard(fluid.core.Scope()):
        program, feeds, fetches = fluid.io.load_inference_model(
            str(tmp_path), exe, model_filename="__model__", params_filename="__params__"
        )
        (out,) = exe.run(program, feed={"x": np.ones((2, 4), np.float32)}, fetch_list=fetches)
    assert out.shape == (2, 1)


def test_io_save_into_a_file_path_is_refused_naming_it(tmp_path, fresh_programs):
    main, startup = fresh_programs
    _, _, pred, _ = _regression(main)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    path = tmp_path / "a_file"
    path.write_text("not a directory")
    with pytest.raises(errors.InvalidArgument, match="a_file.*is a file"):
        fluid.io.save_persistables(exe, str(path), main)
    with pytest.raises(errors.InvalidArgument, match="a_file.*is a file"):
        fluid.io.save_inference_model(str(path), ["x"], [pred], exe)


def test_core_names():
    tensor = fluid.core.LoDTensor()
    tensor.set(np.arange(6, dtype=np.float32).reshape(3, 2))
    tensor.set_recursive_sequence_lengths([[1, 2]])
    assert np.array(tensor).shape == (3, 2)
    assert isinstance(fluid.core.is_compiled_with_cuda(), bool)
    assert repr(fluid.core.CPUPlace()) == "CPUPlace()"
    assert fluid.core.CUDAPlace(0).device_id == 0
    assert isinstance(fluid.core.Scope(), type(fluid.global_scope()))


def test_memory_optimize_is_accepted_and_says_once_that_it_does_nothing(tmp_path):
    """Deprecated in Paddle itself: accepted, nothing done, one notice per process."""
    script = jobs.write(
        tmp_path / "mem.py",
        """
        import fleet as fluid
        fluid.memory_optimize(fluid.default_main_program())
        fluid.memory_optimize(fluid.default_main_program(), skip_opt_set=set(), print_log=False)
        fluid.release_memory(fluid.default_main_program())
        print("done")
        """,
    )
    result = jobs.run_script(script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "done"
    notices = [line for line in result.stderr.splitlines() if "memory_optimize" in line]
    assert len(notices) == 1, result.stderr
    assert "does nothing" in notices[0]


@pytest.mark.parametrize(
    "module, name, advice",
    [
        (fluid, "dygraph", "static programs only"),
        (fluid, "contrib", "not part of Fleet"),
        (fluid, "DataFeeder", "feed="),
        (fluid.layers, "py_reader", "DatasetFactory"),
        (fluid.layers, "conv2d", "no image or recurrent layers"),
        (fluid.core, "AnalysisConfig", "load_inference_model"),
        (fluid.io, "PyReader", "feed="),
    ],
)
def test_missing_paddle_names_say_what_to_use(module, name, advice):
    with pytest.raises(AttributeError, match=advice) as caught:
        getattr(module, name)
    assert name in str(caught.value)


def test_unknown_names_still_raise_a_plain_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'no_such_thing'"):
        fluid.no_such_thing  # noqa: B018
    assert not hasattr(fluid, "no_such_thing")
