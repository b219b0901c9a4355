"""One-process data parallelism (CompiledProgram.with_data_parallel, ParallelExecutor): N CPU
replicas on shares of each batch give the parameters of one process on the whole batch."""

import warnings

import numpy as np
import pytest

import fleet
from fleet import layers
from fleet.compiler import BuildStrategy, CompiledProgram, ExecutionStrategy
from fleet.dataset import DatasetFactory
from fleet.errors import InvalidArgument

VOCAB = 40


def _model(optimizer, is_sparse=True, seed=5, hidden=(16,), dense_width=3):
    """Ids through one embedding (sparse or dense gradient), a dense input, fc layers and a
    softmax classifier."""
    main, startup = fleet.Program(), fleet.Program()
    startup.random_seed = seed
    with fleet.program_guard(main, startup):
        ids = layers.data("ids", [1], dtype="int64", lod_level=1)
        dense = layers.data("dense", [dense_width])
        label = layers.data("label", [1], dtype="int64")
        attr = fleet.ParamAttr("emb", initializer=fleet.initializer.Uniform(-0.5, 0.5))
        emb = layers.embedding(ids, [VOCAB, 6], is_sparse=is_sparse, param_attr=attr)
        pooled = layers.sequence_pool(emb, "sum")
        h = layers.concat([pooled, dense], axis=1)
        for width in hidden:
            h = layers.fc(h, width, act="relu")
        prob = layers.fc(h, 2, act="softmax")
        loss = layers.mean(layers.cross_entropy(prob, label))
        # A factory is called here: a learning-rate schedule must be built in this program.
        (optimizer() if callable(optimizer) else optimizer).minimize(loss)
    return main, startup, loss


def _batch(rng, n, dense_width=3):
    lengths = rng.integers(1, 4, size=n)
    ids = rng.integers(0, VOCAB, size=(int(lengths.sum()), 1)).astype(np.int64)
    return {
        "ids": fleet.LoDTensor(ids, lengths=[lengths.tolist()]),
        "dense": rng.standard_normal((n, dense_width)).astype(np.float32),
        "label": rng.integers(0, 2, size=(n, 1)).astype(np.int64),
    }


def _params(scope, program):
    return {p.name: np.array(scope.find_var(p.name).get_tensor()) for p in program.all_parameters()}


def _step_on_off_and_one(exe, main, loss, compiled, scopes, one, seed, steps):
    """Feeds the same `steps` batches to compiled[True] and compiled[False] (their losses must be
    bit for bit equal) and to the plain program in scope `one`."""
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        feed = _batch(rng, 12)
        (a,) = exe.run(compiled[True], feed=feed, fetch_list=[loss], scope=scopes[True])
        (b,) = exe.run(compiled[False], feed=feed, fetch_list=[loss], scope=scopes[False])
        np.testing.assert_array_equal(a, b)
        exe.run(main, feed=feed, fetch_list=[loss], scope=one)


def _train_both(make_optimizer, replicas, strategy, is_sparse, steps=6, batch=12, hidden=(16,)):
    main, startup, loss = _model(make_optimizer, is_sparse, hidden=hidden)
    exe = fleet.Executor()
    one, many = fleet._core.Scope(), fleet._core.Scope()
    exe.run(startup, scope=one)
    exe.run(startup, scope=many)
    build = BuildStrategy()
    build.reduce_strategy = strategy
    compiled = CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=build, places=[fleet.CPUPlace()] * replicas
    )
    rng = np.random.default_rng(3)
    losses = []
    for _ in range(steps):
        feed = _batch(rng, batch)
        (whole,) = exe.run(main, feed=feed, fetch_list=[loss], scope=one)
        (split,) = exe.run(compiled, feed=feed, fetch_list=[loss], scope=many)
        losses.append((whole, split))
    return _params(one, main), _params(many, main), losses


STRATEGIES = [BuildStrategy.ReduceStrategy.AllReduce, BuildStrategy.ReduceStrategy.Reduce]


@pytest.mark.parametrize("strategy", STRATEGIES, ids=["allreduce", "reduce"])
@pytest.mark.parametrize("is_sparse", [True, False], ids=["sparse", "dense"])
@pytest.mark.parametrize("replicas", [2, 3])
def test_sgd_replicas_match_one_process_on_the_whole_batch(strategy, is_sparse, replicas):
    one, many, losses = _train_both(lambda: fleet.optimizer.SGD(0.5), replicas, strategy, is_sparse)
    for name in one:
        np.testing.assert_allclose(many[name], one[name], rtol=1e-5, atol=1e-5, err_msg=name)
    for whole, split in losses:
        # Paddle's merge: one loss a replica; equal shares, so their mean is the batch's loss.
        assert split.shape == (replicas,)
        np.testing.assert_allclose(split.mean(), whole[0], rtol=1e-5)


@pytest.mark.parametrize("strategy", STRATEGIES, ids=["allreduce", "reduce"])
def test_adam_state_is_updated_once_per_step(strategy):
    one, many, _ = _train_both(lambda: fleet.optimizer.Adam(0.05), 2, strategy, is_sparse=False)
    for name in one:
        np.testing.assert_allclose(many[name], one[name], rtol=1e-5, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("strategy", STRATEGIES, ids=["allreduce", "reduce"])
def test_large_gradients_are_reduced_in_ranges_by_every_replica(strategy):
    """A 256 x 256 weight (65536 elements) is cut into one range a replica."""
    one, many, _ = _train_both(
        lambda: fleet.optimizer.SGD(0.2), 3, strategy, is_sparse=True, steps=3, hidden=(256, 256)
    )
    for name in one:
        np.testing.assert_allclose(many[name], one[name], rtol=1e-5, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("strategy", STRATEGIES, ids=["allreduce", "reduce"])
def test_a_learning_rate_schedule_advances_once_a_step(strategy):
    """The schedule's step counter is shared state: it is advanced once before the replicas
    run, not once a replica."""

    def decayed_sgd():
        return fleet.optimizer.SGD(layers.exponential_decay(0.5, decay_steps=1, decay_rate=0.5))

    one, many, _ = _train_both(decayed_sgd, 2, strategy, is_sparse=True, steps=4)
    for name in one:
        np.testing.assert_allclose(many[name], one[name], rtol=1e-5, atol=1e-5, err_msg=name)


def test_uneven_batch_is_split_as_paddle_splits_it():
    main, startup, loss = _model(fleet.optimizer.SGD(0.1))
    exe = fleet.Executor()
    scope = fleet._core.Scope()
    exe.run(startup, scope=scope)
    compiled = CompiledProgram(main).with_data_parallel(loss_name=loss.name, places=2)
    feed = _batch(np.random.default_rng(0), 5)  # shares of 3 and 2 samples
    (merged,) = exe.run(compiled, feed=feed, fetch_list=["label"], scope=scope)
    np.testing.assert_array_equal(merged, feed["label"])


def test_a_batch_smaller_than_the_replicas_is_an_error_naming_the_sizes():
    main, startup, loss = _model(fleet.optimizer.SGD(0.1))
    exe = fleet.Executor()
    scope = fleet._core.Scope()
    exe.run(startup, scope=scope)
    compiled = CompiledProgram(main).with_data_parallel(loss_name=loss.name, places=4)
    with pytest.raises(InvalidArgument, match=r"batch of 3 .* across 4 replicas"):
        exe.run(compiled, feed=_batch(np.random.default_rng(0), 3), fetch_list=[loss], scope=scope)


def test_replicas_come_from_cpu_num_or_the_cores(monkeypatch):
    main, _, loss = _model(fleet.optimizer.SGD(0.1))
    monkeypatch.setenv("CPU_NUM", "3")
    assert CompiledProgram(main).with_data_parallel(loss_name=loss.name).replicas == 3
    monkeypatch.delenv("CPU_NUM")
    import os

    assert CompiledProgram(main).with_data_parallel(loss_name=loss.name).replicas == os.cpu_count()
    monkeypatch.setenv("CPU_NUM", "zero")
    with pytest.raises(InvalidArgument, match="CPU_NUM"):
        CompiledProgram(main).with_data_parallel(loss_name=loss.name)


def test_strategies_accept_fluid_fields_with_a_notice():
    build, run = BuildStrategy(), ExecutionStrategy()
    build.reduce_strategy = BuildStrategy.ReduceStrategy.Reduce
    run.num_threads = 2
    with pytest.warns(UserWarning, match="memory_optimize"):
        build.memory_optimize = True
    with pytest.warns(UserWarning, match="num_iteration_per_drop_scope"):
        run.num_iteration_per_drop_scope = 10
    with pytest.raises(AttributeError, match="no field 'reduce_stratgy'"):
        build.reduce_stratgy = 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        build.gradient_scale_strategy = BuildStrategy.GradientScaleStrategy.CoeffNumDevice


def test_parallel_executor_runs_the_same_steps():
    main, startup, loss = _model(fleet.optimizer.SGD(0.5))
    exe = fleet.Executor()
    one, many = fleet._core.Scope(), fleet._core.Scope()
    exe.run(startup, scope=one)
    exe.run(startup, scope=many)
    with fleet.scope_guard(many):
        pe = fleet.ParallelExecutor(use_cuda=False, loss_name=loss.name, main_program=main)
        assert pe.device_count >= 1
    rng = np.random.default_rng(9)
    for _ in range(3):
        feed = _batch(rng, 4 * pe.device_count)
        exe.run(main, feed=feed, fetch_list=[loss], scope=one)
        with fleet.scope_guard(many):
            (merged,) = pe.run(fetch_list=[loss.name], feed=feed)
        assert merged.shape == (pe.device_count,)
    for name, value in _params(one, main).items():
        np.testing.assert_allclose(
            _params(many, main)[name], value, rtol=1e-5, atol=1e-5, err_msg=name
        )


def _classifier_and_its_test_program(seed: int):
    """A small classifier trained by SGD, its for_test clone (taken before minimize, as Paddle's
    evaluation pattern does), an Executor and two scopes started alike: (main, loss,
    test_program, exe, one, many)."""
    main, startup = fleet.Program(), fleet.Program()
    startup.random_seed = seed
    with fleet.program_guard(main, startup):
        x = layers.data("x", [4])
        label = layers.data("label", [1], dtype="int64")
        prob = layers.fc(layers.fc(x, 8, act="relu"), 2, act="softmax")
        loss = layers.mean(layers.cross_entropy(prob, label))
        test_program = main.clone(for_test=True)
        fleet.optimizer.SGD(0.5).minimize(loss)
    exe = fleet.Executor()
    one, many = fleet._core.Scope(), fleet._core.Scope()
    exe.run(startup, scope=one)
    exe.run(startup, scope=many)
    return main, loss, test_program, exe, one, many


def test_a_test_program_sharing_the_training_programs_vars_evaluates_the_trained_parameters():
    """Paddle's evaluation pattern: the test program compiled with share_vars_from=<the training
    CompiledProgram> runs on its replicas with the parameters training left, and changes none."""
    main, loss, test_program, exe, one, many = _classifier_and_its_test_program(5)
    train = CompiledProgram(main).with_data_parallel(loss_name=loss.name, places=2)
    test = CompiledProgram(test_program).with_data_parallel(
        loss_name=loss.name, share_vars_from=train, places=2
    )
    rng = np.random.default_rng(4)

    def batch():
        return {
            "x": rng.standard_normal((8, 4)).astype(np.float32),
            "label": rng.integers(0, 2, size=(8, 1)).astype(np.int64),
        }

    for _ in range(4):
        feed = batch()
        exe.run(main, feed=feed, fetch_list=[loss], scope=one)
        exe.run(train, feed=feed, fetch_list=[loss], scope=many)
    trained = _params(many, main)
    probe = batch()
    (expected,) = exe.run(test_program, feed=probe, fetch_list=[loss], scope=one)
    (per_replica,) = exe.run(test, feed=probe, fetch_list=[loss], scope=many)
    assert per_replica.shape == (2,)  # one loss a replica, merged as Paddle merges them
    # Equal shares of 4 samples: the mean of the replicas' losses is the batch's.
    np.testing.assert_allclose(np.mean(per_replica), expected, rtol=1e-5, atol=1e-6)
    for name, value in _params(many, main).items():
        np.testing.assert_array_equal(value, trained[name], err_msg=name)


def test_a_parallel_executor_sharing_vars_runs_in_the_scope_of_the_one_it_shares_from():
    """fluid's pattern: train_exe in a scope of its own, test_exe = ParallelExecutor(...,
    share_vars_from=train_exe) with no scope: the test executor evaluates the parameters
    train_exe trained (not the global scope's), as Paddle's shares train_exe's variables."""
    main, loss, test_program, exe, one, many = _classifier_and_its_test_program(6)
    train_exe = fleet.ParallelExecutor(
        use_cuda=False, loss_name=loss.name, main_program=main, scope=many
    )
    test_exe = fleet.ParallelExecutor(
        use_cuda=False, main_program=test_program, share_vars_from=train_exe
    )
    rng = np.random.default_rng(8)
    batch = 4 * train_exe.device_count

    def feed():
        return {
            "x": rng.standard_normal((batch, 4)).astype(np.float32),
            "label": rng.integers(0, 2, size=(batch, 1)).astype(np.int64),
        }

    for _ in range(3):
        step = feed()
        exe.run(main, feed=step, fetch_list=[loss], scope=one)
        train_exe.run(fetch_list=[loss.name], feed=step)
    probe = feed()
    (expected,) = exe.run(test_program, feed=probe, fetch_list=[loss], scope=one)
    (per_replica,) = test_exe.run(fetch_list=[loss.name], feed=probe)
    assert per_replica.shape == (test_exe.device_count,)
    np.testing.assert_allclose(np.mean(per_replica), expected, rtol=1e-5, atol=1e-6)


def _write_files(tmp_path, rng, files=2, lines=64):
    paths = []
    for f in range(files):
        rows = []
        for _ in range(lines):
            ids = rng.integers(0, VOCAB, size=rng.integers(1, 4))
            dense = rng.standard_normal(3).astype(np.float32)
            rows.append(
                " ".join(
                    [str(len(ids)), *map(str, ids), "3", *map(str, dense), "1"]
                    + [str(int(rng.integers(0, 2)))]
                )
            )
        path = tmp_path / f"part-{f}"
        path.write_text("\n".join(rows) + "\n")
        paths.append(str(path))
    return paths


def _dataset(main, files, batch_size):
    ds = DatasetFactory().create_dataset("QueueDataset")
    block = main.global_block()
    ds.set_use_var([block.var("ids"), block.var("dense"), block.var("label")])
    ds.set_batch_size(batch_size)
    ds.set_thread(1)
    ds.set_filelist(files)
    return ds


@pytest.mark.parametrize("strategy", STRATEGIES, ids=["allreduce", "reduce"])
def test_train_from_dataset_takes_one_batch_a_replica_per_step(tmp_path, strategy):
    """Two replicas on batches of 8 train as one thread on batches of 16."""
    files = _write_files(tmp_path, np.random.default_rng(4))
    main, startup, loss = _model(fleet.optimizer.SGD(0.5))
    exe = fleet.Executor()
    one, many = fleet._core.Scope(), fleet._core.Scope()
    exe.run(startup, scope=one)
    exe.run(startup, scope=many)
    exe.train_from_dataset(main, _dataset(main, files, 16), scope=one, thread=1, print_period=0)
    build = BuildStrategy()
    build.reduce_strategy = strategy
    compiled = CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=build, places=2
    )
    run = exe.train_from_dataset(
        compiled, _dataset(main, files, 8), scope=many, fetch_list=[loss], print_period=0
    )
    assert run.samples == 128
    assert run.batches == 16
    for name, value in _params(one, main).items():
        np.testing.assert_allclose(
            _params(many, main)[name], value, rtol=1e-5, atol=1e-5, err_msg=name
        )


def test_the_cpu_documents_snippet_runs_by_its_names(monkeypatch):
    """The CPU best-practice document's data-parallel lines, with fleet as fluid."""
    fluid = fleet
    monkeypatch.setenv("CPU_NUM", "2")
    main, startup, loss = _model(fleet.optimizer.SGD(0.5))
    exe = fluid.Executor(fluid.CPUPlace())
    one, many = fluid.core.Scope(), fluid.core.Scope()
    exe.run(startup, scope=one)
    exe.run(startup, scope=many)
    build_strategy = fluid.BuildStrategy()
    build_strategy.reduce_strategy = fluid.BuildStrategy.ReduceStrategy.Reduce
    exec_strategy = fluid.ExecutionStrategy()
    exec_strategy.num_threads = 2
    compiled_prog = fluid.compiler.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=build_strategy, exec_strategy=exec_strategy
    )
    rng = np.random.default_rng(2)
    for _ in range(3):
        feed = _batch(rng, 8)
        exe.run(main, feed=feed, fetch_list=[loss.name], scope=one)
        (merged,) = exe.run(compiled_prog, feed=feed, fetch_list=[loss.name], scope=many)
        assert merged.shape == (2,)
    for name, value in _params(one, main).items():
        np.testing.assert_allclose(
            _params(many, main)[name], value, rtol=1e-5, atol=1e-5, err_msg=name
        )


def test_a_list_feed_gives_each_replica_its_own_dict():
    main, startup, loss = _model(fleet.optimizer.SGD(0.5))
    exe = fleet.Executor()
    whole, listed = fleet._core.Scope(), fleet._core.Scope()
    exe.run(startup, scope=whole)
    exe.run(startup, scope=listed)
    compiled = CompiledProgram(main).with_data_parallel(loss_name=loss.name, places=2)
    rng = np.random.default_rng(6)
    for _ in range(2):
        halves = [_batch(rng, 4), _batch(rng, 4)]
        ids = np.concatenate([np.array(h["ids"]) for h in halves])
        lengths = sum((h["ids"].recursive_sequence_lengths()[0] for h in halves), [])
        feed = {
            "ids": fleet.LoDTensor(ids, lengths=[lengths]),
            "dense": np.concatenate([h["dense"] for h in halves]),
            "label": np.concatenate([h["label"] for h in halves]),
        }
        exe.run(compiled, feed=feed, fetch_list=[loss], scope=whole)
        (per_replica,) = exe.run(compiled, feed=halves, fetch_list=[loss], scope=listed)
        assert per_replica.shape == (2,)
    for name, value in _params(whole, main).items():
        np.testing.assert_allclose(_params(listed, main)[name], value, rtol=1e-6, err_msg=name)
    with pytest.raises(InvalidArgument, match="one dict a replica, got 3 dicts for 2 replicas"):
        exe.run(compiled, feed=[_batch(rng, 2)] * 3, fetch_list=[loss], scope=listed)


# Hidden widths whose dense gradients the two replicas own in equal shares (with the embedding's
# gradient dense or sparse): the engine reduces them during the backward pass.
_BALANCED_HIDDEN = (16, 16, 16)


def _layout_model(optimizer, is_sparse, layout):
    """The barrier-work tests' two layouts: "balanced" owners (whole gradients), or
    "dense_split", one hidden layer whose unbalanced dense gradients the plan splits by rows.
    Returns the programs, the loss and the dense input's width."""
    if layout == "balanced":
        return (*_model(optimizer, is_sparse=is_sparse, hidden=_BALANCED_HIDDEN), 3)
    return (*_model(optimizer, is_sparse=is_sparse, hidden=(48,), dense_width=12), 12)


def _compiled(main, loss, strategy, overlap):
    build = BuildStrategy()
    build.reduce_strategy = strategy
    build.overlap_reduction = overlap
    return CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=build, places=2
    )


def _decayed_adam():
    return fleet.optimizer.Adam(layers.exponential_decay(0.05, decay_steps=1, decay_rate=0.5))


@pytest.mark.parametrize("strategy", STRATEGIES, ids=["allreduce", "reduce"])
@pytest.mark.parametrize("is_sparse", [True, False], ids=["sparse", "dense"])
@pytest.mark.parametrize(
    "optimizer", [lambda: fleet.optimizer.SGD(0.5), _decayed_adam], ids=["sgd", "decayed_adam"]
)
def test_overlapped_reduction_gives_the_same_parameters_bit_for_bit(strategy, is_sparse, optimizer):
    """The first step reduces after the backward pass and finds the owners balanced; the later
    ones reduce each gradient as soon as both replicas are past it. The sums are the same, term
    for term, as after the backward pass, and match one process on the whole batch."""
    main, startup, loss = _model(optimizer, is_sparse, hidden=_BALANCED_HIDDEN)
    exe = fleet.Executor()
    scopes = {}
    compiled = {}
    for overlap in (True, False):
        compiled[overlap] = _compiled(main, loss, strategy, overlap)
        scopes[overlap] = fleet._core.Scope()
        exe.run(startup, scope=scopes[overlap])
    one = fleet._core.Scope()
    exe.run(startup, scope=one)
    steps = 5
    _step_on_off_and_one(exe, main, loss, compiled, scopes, one, seed=4, steps=steps)
    assert exe.data_parallel_runner(compiled[True], scopes[True]).overlapped_steps == steps - 1
    assert exe.data_parallel_runner(compiled[False], scopes[False]).overlapped_steps == 0
    for name, value in _params(scopes[False], main).items():
        np.testing.assert_array_equal(_params(scopes[True], main)[name], value, err_msg=name)
        np.testing.assert_allclose(value, _params(one, main)[name], rtol=1e-5, atol=1e-5)


def _mlp(width=24, layers_=4):
    """The benchmark's MLP, small: equal fc layers on a dense input, so that the first layer's
    weight gradient, which the backward pass finishes last, is reduced after the barrier that
    ends it by its owner alone."""
    main, startup = fleet.Program(), fleet.Program()
    startup.random_seed = 7
    with fleet.program_guard(main, startup):
        x = layers.data("x", [width])
        label = layers.data("label", [1])
        h = x
        for _ in range(layers_):
            h = layers.fc(h, width, act="relu")
        logit = layers.fc(h, 1)
        loss = layers.mean(layers.sigmoid_cross_entropy_with_logits(logit, label))
        fleet.optimizer.SGD(0.05).minimize(loss)
    return main, startup, loss


@pytest.mark.parametrize("strategy", STRATEGIES, ids=["allreduce", "reduce"])
def test_a_replica_with_less_work_after_the_barrier_keeps_a_reduction_for_it(strategy):
    """The MLP's replicas own two of its four weights each, and the owner of the first layer's
    reduces it after the backward pass while the other would wait: the other keeps its last
    reduction of the backward pass until then (not with BuildStrategy.even_barrier_work off).
    The sums are the same: the parameters and losses are bit for bit those of the reduction
    after the backward pass, and one process's to 1e-5."""
    main, startup, loss = _mlp()
    exe = fleet.Executor()
    compiled, scopes = {}, {}
    for kind in (True, False, "uneven"):  # overlapped, not, overlapped without the evening
        compiled[kind] = _compiled(main, loss, strategy, overlap=kind is not False)
        compiled[kind].build_strategy.even_barrier_work = kind != "uneven"
        scopes[kind] = fleet._core.Scope()
        exe.run(startup, scope=scopes[kind])
    one = fleet._core.Scope()
    exe.run(startup, scope=one)
    rng = np.random.default_rng(11)
    steps = 5
    for _ in range(steps):
        feed = {
            "x": rng.standard_normal((16, 24)).astype(np.float32),
            "label": (rng.random((16, 1)) < 0.5).astype(np.float32),
        }
        (a,) = exe.run(compiled[True], feed=feed, fetch_list=[loss], scope=scopes[True])
        (b,) = exe.run(compiled[False], feed=feed, fetch_list=[loss], scope=scopes[False])
        (c,) = exe.run(compiled["uneven"], feed=feed, fetch_list=[loss], scope=scopes["uneven"])
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(c, b)
        exe.run(main, feed=feed, fetch_list=[loss], scope=one)
    runners = {k: exe.data_parallel_runner(compiled[k], scopes[k]) for k in compiled}
    assert runners[True].overlapped_steps == runners["uneven"].overlapped_steps == steps - 1
    assert runners[True].deferred_reductions == 1  # the other replica's last weight gradient
    assert runners["uneven"].deferred_reductions == 0
    assert runners[False].deferred_reductions == 0
    for name, value in _params(scopes[False], main).items():
        for kind in (True, "uneven"):
            np.testing.assert_array_equal(_params(scopes[kind], main)[name], value, err_msg=name)
        np.testing.assert_allclose(value, _params(one, main)[name], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("strategy", STRATEGIES, ids=["allreduce", "reduce"])
def test_an_error_in_one_replica_ends_an_overlapped_step_before_any_update(strategy):
    """Replica 1 fails in its forward pass while replica 0 finishes the compute program and
    waits for it: the step raises the error instead of waiting forever, no parameter changes,
    and the next step runs overlapped again."""
    main, startup, loss = _model(lambda: fleet.optimizer.SGD(0.5), True, hidden=_BALANCED_HIDDEN)
    exe = fleet.Executor()
    scope = fleet._core.Scope()
    exe.run(startup, scope=scope)
    compiled = _compiled(main, loss, strategy, overlap=True)
    rng = np.random.default_rng(8)
    for _ in range(2):
        exe.run(compiled, feed=_batch(rng, 12), fetch_list=[loss], scope=scope)
    runner = exe.data_parallel_runner(compiled, scope)
    assert runner.overlapped_steps == 1
    before = _params(scope, main)

    def tensors(feed):  # past Executor.run's shape check, which would catch the bad feed
        return {
            k: v if isinstance(v, fleet._core.LoDTensor) else fleet.LoDTensor(v)
            for k, v in feed.items()
        }

    bad = _batch(rng, 6)
    bad["dense"] = rng.standard_normal((6, 4)).astype(np.float32)  # one column too many
    with pytest.raises(InvalidArgument, match="mul"):
        runner.run([tensors(_batch(rng, 6)), tensors(bad)], [loss.name])
    for name, value in _params(scope, main).items():
        np.testing.assert_array_equal(value, before[name], err_msg=name)
    exe.run(compiled, feed=_batch(rng, 12), fetch_list=[loss], scope=scope)
    assert runner.overlapped_steps == 2  # the failed step is not counted


def test_a_large_sparse_embedding_leaves_the_dense_parameters_balanced():
    """An is_sparse table's update costs the rows a step touches, not its size: counted whole,
    this 1000 x 8 table would have left its owner no dense parameter. Looked up twice, its
    gradient is summed from renamed parts."""
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        a = layers.data("a", [1], dtype="int64", lod_level=1)
        b = layers.data("b", [1], dtype="int64", lod_level=1)
        label = layers.data("label", [1], dtype="int64")
        attr = fleet.ParamAttr("table")
        pooled = [
            layers.sequence_pool(
                layers.embedding(ids, [1000, 8], is_sparse=True, param_attr=attr), "sum"
            )
            for ids in (a, b)
        ]
        h = layers.concat(pooled, axis=1)
        for _ in range(2):
            h = layers.fc(h, 16, act="relu", bias_attr=False)
        prob = layers.fc(h, 2, act="softmax", bias_attr=False)
        loss = layers.mean(layers.cross_entropy(prob, label))
        fleet.optimizer.SGD(0.1).minimize(loss)
    plan = CompiledProgram(main).with_data_parallel(loss_name=loss.name, places=2).plan()
    dense = {name: owner for name, owner in plan.param_owner.items() if name != "table"}
    assert sorted(dense.values()) == [0, 0, 1], dense  # 16x16 | 16x16, then 16x2
    assert "table@GRAD" in plan.gradients


def _lazy_adam():
    return fleet.optimizer.Adam(0.05, lazy_mode=True)


def _row_shares(plan, replica):
    """The gradients replica `replica`'s update ops read from a share of the rows."""
    names = set()
    for phase in plan.phases:
        if phase[replica] is not None:
            for op in phase[replica].blocks[0].ops:
                names |= {a for v in op.inputs for a in v.arguments if a.endswith("@ROWS")}
    return names


def _compiled_with_and_without(main, startup, loss, strategy, replicas, field, **fixed):
    """`main` compiled twice, with the BuildStrategy flag `field` True and False (and the `fixed`
    fields), each with a scope the startup program initialised, and one process's scope:
    (exe, {flag: compiled}, {flag: scope}, one)."""
    exe = fleet.Executor()
    scopes, compiled = {}, {}
    for flag in (True, False):
        build = BuildStrategy()
        build.reduce_strategy = strategy
        setattr(build, field, flag)
        for name, value in fixed.items():
            setattr(build, name, value)
        compiled[flag] = CompiledProgram(main).with_data_parallel(
            loss_name=loss.name, build_strategy=build, places=replicas
        )
        scopes[flag] = fleet._core.Scope()
        exe.run(startup, scope=scopes[flag])
    one = fleet._core.Scope()
    exe.run(startup, scope=one)
    return exe, compiled, scopes, one


def _assert_switch_exact_and_near_one(main, scopes, one):
    """Two runs that differ by one switch: the parameters with it on (scopes[True]) are bit for
    bit those with it off (scopes[False]), and one process's to 1e-5."""
    on, off, reference = (_params(s, main) for s in (scopes[True], scopes[False], one))
    for name, value in off.items():
        np.testing.assert_array_equal(on[name], value, err_msg=name)
        np.testing.assert_allclose(value, reference[name], rtol=1e-5, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("strategy", STRATEGIES, ids=["allreduce", "reduce"])
@pytest.mark.parametrize(
    "optimizer",
    [lambda: fleet.optimizer.SGD(0.5), _lazy_adam, lambda: fleet.optimizer.Adagrad(0.3)],
    ids=["sgd", "lazy_adam", "adagrad"],
)
@pytest.mark.parametrize(
    "replicas, hidden", [(2, (16,)), (3, (16,)), (2, _BALANCED_HIDDEN)], ids=["2", "3", "overlap"]
)
def test_a_sparse_update_split_by_rows_gives_the_same_parameters_bit_for_bit(
    strategy, optimizer, replicas, hidden
):
    """Every replica reduces and updates its share of the embedding's rows instead of one
    replica all of them: the same arithmetic on the same rows, in the same order, so the same
    parameters as the update on one replica (and as one process, to 1e-5). Adam's beta powers
    advance once a step. With balanced owners the split gradient is reduced during the backward
    pass."""
    main, startup, loss = _model(optimizer, is_sparse=True, hidden=hidden)
    # The dense split has tests of its own, below.
    exe, compiled, scopes, one = _compiled_with_and_without(
        main, startup, loss, strategy, replicas, "split_sparse_updates", split_dense_updates=False
    )
    plan = compiled[True].plan()
    assert plan.row_parts == {"emb@GRAD": "emb@GRAD@ROWS"}
    for r in range(replicas):  # the path is taken: every replica updates a share
        assert _row_shares(plan, r) == {"emb@GRAD@ROWS"}, r
    assert compiled[False].plan().row_parts == {}
    steps = 5
    _step_on_off_and_one(exe, main, loss, compiled, scopes, one, seed=6, steps=steps)
    if hidden == _BALANCED_HIDDEN:
        runner = exe.data_parallel_runner(compiled[True], scopes[True])
        assert runner.overlapped_steps == steps - 1
    _assert_switch_exact_and_near_one(main, scopes, one)
    if optimizer is _lazy_adam:  # the split table's beta powers advanced once a step
        for name, beta in (("emb_adam_beta1_pow_acc", 0.9), ("emb_adam_beta2_pow_acc", 0.999)):
            power = np.array(scopes[True].find_var(name).get_tensor())
            np.testing.assert_allclose(power, [beta ** (steps + 1)], rtol=1e-6, err_msg=name)


def test_an_update_of_every_row_is_not_split():
    """Adam without lazy_mode decays the moments of every row of a sparse parameter each step,
    so it stays whole on one replica."""
    main, _, loss = _model(lambda: fleet.optimizer.Adam(0.05), is_sparse=True)
    plan = CompiledProgram(main).with_data_parallel(loss_name=loss.name, places=2).plan()
    assert "emb@GRAD" not in plan.row_parts
    for r in range(2):
        assert "emb@GRAD@ROWS" not in _row_shares(plan, r)


def _adam():
    return fleet.optimizer.Adam(0.05)


@pytest.mark.parametrize("strategy", STRATEGIES, ids=["allreduce", "reduce"])
@pytest.mark.parametrize(
    "optimizer",
    [lambda: fleet.optimizer.SGD(0.5), _adam, lambda: fleet.optimizer.Adagrad(0.05)],
    ids=["sgd", "adam", "adagrad"],
)
@pytest.mark.parametrize("is_sparse", [True, False], ids=["sparse", "dense"])
@pytest.mark.parametrize("replicas", [2, 3])
def test_a_dense_update_split_by_rows_gives_the_same_parameters_bit_for_bit(
    strategy, optimizer, is_sparse, replicas
):
    """One hidden layer leaves the whole dense gradients unbalanced (18x48 on one replica against
    48x2 and the biases on the others): the plan splits the fewest large ones by rows, a block a
    replica, so each replica reduces and updates its block (Adam's copies with lazy_mode, which
    on blocks that cover every row once is the dense update element for element). The plan is
    then owner_local, and the steps after the first reduce during the backward pass. The
    parameters and losses are bit for bit those of the whole gradients, and one process's to
    1e-5; under AllReduce a fetched gradient is the reduced one in every replica."""
    main, startup, loss = _model(optimizer, is_sparse=is_sparse, hidden=(48,), dense_width=12)
    exe, compiled, scopes, one = _compiled_with_and_without(
        main, startup, loss, strategy, replicas, "split_dense_updates"
    )
    plan = compiled[True].plan()
    dense_parts = {g for g in plan.row_parts if g != "emb@GRAD"}
    assert dense_parts and dense_parts <= {"fc_0.w_0@GRAD", "fc_1.w_0@GRAD", "emb@GRAD"}
    for r in range(replicas):  # the path is taken: every replica updates a block of rows
        assert dense_parts <= {g[: -len("@ROWS")] for g in _row_shares(plan, r)}, r
    assert {g for g in compiled[False].plan().row_parts if g != "emb@GRAD"} == set()
    steps = 5
    rng = np.random.default_rng(9)
    for step in range(steps):
        feed = _batch(rng, 12, dense_width=12)
        fetch = [loss, min(dense_parts)]
        a = exe.run(compiled[True], feed=feed, fetch_list=fetch, scope=scopes[True])
        b = exe.run(compiled[False], feed=feed, fetch_list=fetch, scope=scopes[False])
        np.testing.assert_array_equal(a[0], b[0])
        if strategy == BuildStrategy.ReduceStrategy.AllReduce:
            # Each replica's reduced gradient, merged as Paddle merges fetches: the same
            # reduced values from every replica, bit for bit those of the whole reduction.
            np.testing.assert_array_equal(a[1], b[1], err_msg=f"step {step}")
            rows = a[1].shape[0] // replicas
            for r in range(1, replicas):
                np.testing.assert_array_equal(a[1][r * rows : (r + 1) * rows], a[1][:rows])
        exe.run(main, feed=feed, fetch_list=[loss], scope=one)
    runner = exe.data_parallel_runner(compiled[True], scopes[True])
    assert runner.overlapped_steps == steps - 1
    assert exe.data_parallel_runner(compiled[False], scopes[False]).overlapped_steps == 0
    _assert_switch_exact_and_near_one(main, scopes, one)


def test_balanced_or_every_row_updates_are_not_split_by_rows():
    """A plan whose whole dense gradients are balanced keeps them whole (a block's update would
    copy its rows once more for nothing); momentum, which decays every row of a parameter given
    rows, is never split."""
    main, _, loss = _model(lambda: fleet.optimizer.SGD(0.5), hidden=_BALANCED_HIDDEN)
    plan = CompiledProgram(main).with_data_parallel(loss_name=loss.name, places=2).plan()
    assert set(plan.row_parts) == {"emb@GRAD"}
    main, _, loss = _model(lambda: fleet.optimizer.Momentum(0.1, 0.9), hidden=(16,))
    plan = CompiledProgram(main).with_data_parallel(loss_name=loss.name, places=2).plan()
    assert plan.row_parts == {}


@pytest.mark.parametrize("strategy", STRATEGIES, ids=["allreduce", "reduce"])
def test_the_replicas_poll_as_fleet_dp_spin_us_says_with_the_same_parameters(monkeypatch, strategy):
    """FLEET_DP_SPIN_US, read when the replicas are made, only changes how long a waiting
    replica polls before it sleeps: at 0 (sleep at once), the default and a long poll the
    overlapped steps give the same parameters, bit for bit, and one process's."""
    main, startup, loss = _model(fleet.optimizer.SGD(0.5), True, hidden=_BALANCED_HIDDEN)
    exe = fleet.Executor()
    spins = ("0", None, "5000")
    scopes, compiled, runners = {}, {}, {}
    for spin in spins:
        if spin is None:
            monkeypatch.delenv("FLEET_DP_SPIN_US", raising=False)
        else:
            monkeypatch.setenv("FLEET_DP_SPIN_US", spin)
        compiled[spin] = _compiled(main, loss, strategy, overlap=True)
        scopes[spin] = fleet._core.Scope()
        exe.run(startup, scope=scopes[spin])
        runners[spin] = exe.data_parallel_runner(compiled[spin], scopes[spin])
    monkeypatch.delenv("FLEET_DP_SPIN_US", raising=False)
    one = fleet._core.Scope()
    exe.run(startup, scope=one)
    steps = 5
    rng = np.random.default_rng(4)
    for _ in range(steps):
        feed = _batch(rng, 12)
        losses = [
            exe.run(compiled[spin], feed=feed, fetch_list=[loss], scope=scopes[spin])[0]
            for spin in spins
        ]
        for other in losses[1:]:
            np.testing.assert_array_equal(other, losses[0])
        exe.run(main, feed=feed, fetch_list=[loss], scope=one)
    for spin in spins:
        assert runners[spin].overlapped_steps == steps - 1
    # With no poll, the worker's wait for each next step (it checks right after its own part,
    # long before Python sends the next step) sleeps.
    assert runners["0"].polls_given_up["for_work"] >= 1
    for spin in ("0", "5000"):
        for name, value in _params(scopes[None], main).items():
            np.testing.assert_array_equal(_params(scopes[spin], main)[name], value, err_msg=name)
    for name, value in _params(scopes[None], main).items():
        np.testing.assert_allclose(value, _params(one, main)[name], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("value", ["fast", "-1", "2000000"])
def test_a_bad_fleet_dp_spin_us_is_an_error_naming_the_value(monkeypatch, value):
    main, startup, loss = _model(fleet.optimizer.SGD(0.5), True)
    monkeypatch.setenv("FLEET_DP_SPIN_US", value)
    exe = fleet.Executor()
    scope = fleet._core.Scope()
    exe.run(startup, scope=scope)
    compiled = _compiled(main, loss, STRATEGIES[0], overlap=True)
    with pytest.raises(InvalidArgument, match=f"FLEET_DP_SPIN_US.*{value!r}"):
        exe.data_parallel_runner(compiled, scope)
