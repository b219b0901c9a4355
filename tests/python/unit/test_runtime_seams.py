"""The runtime seams seen from Python: editing a block's ops or vars directly never leaves a
stale prepared program; the pass helpers remove and rename; train_from_dataset runs on the
executor it is called on (its profile counts both drivers)."""

from __future__ import annotations

import numpy as np
import pytest

import fleet
from fleet import layers
from fleet.errors import InvalidArgument


def _program():
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        x = layers.data("x", [2])
        y = layers.scale(x, scale=2.0)
        z = layers.scale(y, scale=3.0)
    return main, x, y, z


def test_direct_edits_of_ops_and_vars_bump_the_version():
    main, _, _, _ = _program()
    block = main.global_block()
    for edit in (
        lambda: block.ops.pop(),
        lambda: block.ops.insert(0, block.ops[0]),
        lambda: block.ops.__setitem__(0, block.ops[0]),
        lambda: block.vars.pop("x"),
        lambda: block.vars.update({}),
    ):
        before = main.version
        edit()
        assert main.version > before


def test_an_executor_never_runs_a_stale_program_after_a_direct_edit():
    main, x, y, z = _program()
    exe = fleet.Executor()
    feed = {"x": np.ones((1, 2), np.float32)}
    with fleet.scope_guard(fleet.executor._core.Scope()):
        (out,) = exe.run(main, feed=feed, fetch_list=[z])
        np.testing.assert_allclose(out, 6.0)
        main.global_block().ops[1].attrs["scale"] = 3.0  # an attribute edit, then an op edit
        del main.global_block().ops[0]  # z = 3 * y, y no longer computed
        main.global_block().ops[0].inputs["X"] = [x.name]
        (out,) = exe.run(main, feed=feed, fetch_list=[z])
        np.testing.assert_allclose(out, 3.0)


def test_remove_and_rename_helpers():
    main, x, y, z = _program()
    block = main.global_block()
    with pytest.raises(InvalidArgument, match="still use it"):
        block._remove_var(y.name)
    block._rename_var(y.name, "renamed")
    assert "renamed" in block.ops[0].output_names and "renamed" in block.ops[1].input_names
    removed = block._remove_op(1)
    assert removed.type == "scale" and len(block.ops) == 1


def test_train_from_dataset_runs_on_the_callers_executor(tmp_path):
    path = tmp_path / "part-0"
    path.write_text("".join(f"2 {i}.0 1.0\n" for i in range(32)))
    main, x, y, z = _program()
    dataset = fleet.DatasetFactory().create_dataset("QueueDataset")
    dataset.set_use_var([x])
    dataset.set_batch_size(8)
    dataset.set_filelist([str(path)])
    exe = fleet.Executor()
    exe.enable_profiling()
    with fleet.scope_guard(fleet.executor._core.Scope()):
        result = exe.train_from_dataset(main, dataset, thread=2, print_period=0)
        exe.run(main, feed={"x": np.ones((1, 2), np.float32)}, fetch_list=[z])
    assert result.samples == 32
    # 4 batches of the pass and 1 Executor.run, in one executor's profile.
    assert exe.profile()["runs"] == 5
