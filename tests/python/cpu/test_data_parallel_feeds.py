"""A data-parallel pass hands each batch to its replica by moving it into the replica's scope
(DataParallelEngine::Step takes the shares by value), where before the pass kept its own copy
and released it between steps, while the other replicas waited. Executor.run's list feed is
still copied. Both must train on the same values: a pass of train_from_dataset gives, bit for
bit, the losses and parameters of the same batches fed one step at a time through Executor.run,
on the plain first step and the overlapped steps after it."""

import numpy as np
import pytest

import fleet
from fleet.compiler import BuildStrategy, CompiledProgram
from fleet.dataset import DatasetFactory

from .test_data_parallel import STRATEGIES, VOCAB, _model, _params

_BATCH = 8


def _rows(rng, lines):
    """(ids, dense, label) per line, with the dense values as float32, as the files hold them."""
    return [
        (
            rng.integers(0, VOCAB, size=int(rng.integers(1, 4))),
            rng.standard_normal(3).astype(np.float32),
            int(rng.integers(0, 2)),
        )
        for _ in range(lines)
    ]


def _write(tmp_path, parts):
    paths = []
    for f, rows in enumerate(parts):
        lines = [
            " ".join([str(len(ids)), *map(str, ids), "3", *map(str, dense), "1", str(label)])
            for ids, dense, label in rows
        ]
        path = tmp_path / f"part-{f}"
        path.write_text("\n".join(lines) + "\n")
        paths.append(str(path))
    return paths


def _feed(rows):
    lengths = [len(ids) for ids, _, _ in rows]
    ids = np.concatenate([ids for ids, _, _ in rows]).astype(np.int64).reshape(-1, 1)
    return {
        "ids": fleet.LoDTensor(ids, lengths=[lengths]),
        "dense": np.stack([dense for _, dense, _ in rows]),
        "label": np.array([[label] for _, _, label in rows], dtype=np.int64),
    }


def _compiled(main, loss, strategy):
    build = BuildStrategy()
    build.reduce_strategy = strategy
    return CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=build, places=2
    )


@pytest.mark.parametrize("strategy", STRATEGIES, ids=["allreduce", "reduce"])
@pytest.mark.parametrize(
    "optimizer",
    [lambda: fleet.optimizer.SGD(0.5), lambda: fleet.optimizer.Adam(0.05)],
    ids=["sgd", "adam"],
)
@pytest.mark.parametrize("is_sparse", [True, False], ids=["sparse", "dense"])
def test_a_pass_trains_bit_for_bit_as_steps_of_copied_feeds(
    tmp_path, strategy, optimizer, is_sparse
):
    rng = np.random.default_rng(11)
    parts = [_rows(rng, 32), _rows(rng, 32)]  # 8 batches: 4 steps of 2 replicas
    files = _write(tmp_path, parts)
    main, startup, loss = _model(optimizer, is_sparse)
    exe = fleet.Executor()
    passed, stepped = fleet._core.Scope(), fleet._core.Scope()
    exe.run(startup, scope=passed)
    exe.run(startup, scope=stepped)

    # One reader thread reads the files in order, so the pass's steps take these batches.
    ds = DatasetFactory().create_dataset("QueueDataset")
    block = main.global_block()
    ds.set_use_var([block.var("ids"), block.var("dense"), block.var("label")])
    ds.set_batch_size(_BATCH)
    ds.set_thread(1)
    ds.set_filelist(files)
    run = exe.train_from_dataset(
        _compiled(main, loss, strategy), ds, scope=passed, fetch_list=[loss], print_period=0
    )

    rows = parts[0] + parts[1]
    batches = [rows[i : i + _BATCH] for i in range(0, len(rows), _BATCH)]
    stepping = _compiled(main, loss, strategy)
    losses = []
    for step in range(len(batches) // 2):
        feeds = [_feed(batches[2 * step]), _feed(batches[2 * step + 1])]
        (merged,) = exe.run(stepping, feed=feeds, fetch_list=[loss], scope=stepped)
        losses.append(merged)

    assert run.batches == len(batches)
    # The pass reports the sum of the replicas' losses over its steps and the last step's values.
    np.testing.assert_array_equal(np.asarray(run.fetch[loss.name]).reshape(-1), losses[-1])
    assert run.fetch_sums[loss.name] == pytest.approx(float(np.sum(losses)), rel=1e-6)
    stepped_params = _params(stepped, main)
    for name, value in _params(passed, main).items():
        np.testing.assert_array_equal(value, stepped_params[name], err_msg=name)
