"""A parameter-server worker's program compiled with data parallelism (the CPU document's PS
section): 2 replicas in one worker, each pulling and pushing its share's rows, the dense
gradients reduced in memory and sent once a step. In sync mode the servers end with the
parameters of one process training on the whole batch (1e-5)."""

import importlib.util
import json
import pathlib
import subprocess

import numpy as np
import pytest

import fleet
from fleet import layers
from fleet.compiler import BuildStrategy, CompiledProgram
from fleet.distributed_strategy import DistributedStrategyFactory
from fleet.ps import program_pass as ps_pass
from fleet.ps.runtime import PsRuntime
from fleet.role_maker import Role, UserDefinedRoleMaker
from tests.python.e2e import launch_helpers as lh

SCRIPT = pathlib.Path(__file__).resolve().parent / "scripts" / "cpu_doc_ps_data_parallel.py"

VOCAB, STEPS, BATCH = 30, 4, 12


def _model():
    main, startup = fleet.Program(), fleet.Program()
    startup.random_seed = 4
    with fleet.program_guard(main, startup):
        ids = layers.data("ids", [1], dtype="int64", lod_level=1)
        x = layers.data("x", [3])
        y = layers.data("y", [1])
        attr = fleet.ParamAttr(name="emb", initializer=fleet.initializer.Constant(0.0))
        emb = layers.embedding(ids, [VOCAB, 4], is_sparse=True, param_attr=attr)
        h = layers.fc(layers.concat([layers.sequence_pool(emb, "sum"), x], axis=1), 8, act="relu")
        diff = layers.elementwise_sub(layers.fc(h, 1), y)
        loss = layers.mean(layers.elementwise_mul(diff, diff))
        _, params_grads = fleet.optimizer.SGD(0.2).minimize(loss)
    return main, startup, loss, params_grads


def _batch(step):
    rng = np.random.default_rng(step)
    return {
        "ids": fleet.LoDTensor(
            rng.integers(0, VOCAB, size=(2 * BATCH, 1)).astype(np.int64), lengths=[[2] * BATCH]
        ),
        "x": rng.standard_normal((BATCH, 3)).astype(np.float32),
        "y": rng.standard_normal((BATCH, 1)).astype(np.float32),
    }


@pytest.mark.parametrize("strategy", ["AllReduce", "Reduce"])
def test_sync_ps_worker_with_two_replicas_matches_one_process(ps_servers, strategy):
    main, startup, loss, _ = _model()
    exe, scope = fleet.Executor(), fleet._core.Scope()
    exe.run(startup, scope=scope)
    for step in range(STEPS):
        exe.run(main, feed=_batch(step), fetch_list=[loss], scope=scope)
    expected = {
        p.name: np.array(scope.find_var(p.name).get_tensor()) for p in main.all_parameters()
    }

    main, startup, loss, params_grads = _model()
    sgd = fleet.optimizer.SGD(0.2)
    plan = ps_pass.rewrite(
        main, startup, sgd, params_grads, DistributedStrategyFactory.create_sync_strategy()
    )
    cluster = ps_servers(plan.table_configs())
    role = UserDefinedRoleMaker(
        current_id=0, role=Role.WORKER, worker_num=1, server_endpoints=cluster.endpoints
    )
    resources = fleet._core.RuntimeResources()
    runtime = PsRuntime(role, plan, resources)
    exe, scope = fleet.Executor(resources=resources), fleet._core.Scope()
    exe.run(startup, scope=scope)
    runtime.init_worker(scope)
    try:
        build = BuildStrategy()
        build.reduce_strategy = getattr(BuildStrategy.ReduceStrategy, strategy)
        compiled = CompiledProgram(main).with_data_parallel(
            loss_name=loss.name, build_strategy=build, places=2
        )
        for step in range(STEPS):
            (losses,) = exe.run(compiled, feed=_batch(step), fetch_list=[loss], scope=scope)
            assert losses.shape == (2,)
        with cluster.client() as client:
            rows = client.pull_sparse(plan.sparse[0].table_id, np.arange(VOCAB, dtype=np.int64))
    finally:
        runtime.stop_worker()
    np.testing.assert_allclose(rows, expected.pop("emb"), rtol=1e-5, atol=1e-6)
    for name, value in expected.items():
        got = np.array(scope.find_var(name).get_tensor())
        np.testing.assert_allclose(got, value, rtol=1e-5, atol=1e-6, err_msg=name)


def test_the_cpu_documents_ps_section_runs_under_fleetrun(tmp_path):
    """1 server, 2 workers of 2 replicas each (CPU_NUM=2), sync: the servers end where one
    process training on both workers' batches together ends."""
    result = subprocess.run(
        lh.launcher_command(["--server_num=1", "--worker_num=2"], SCRIPT),
        env=lh.job_env(tmp_path, OUT_DIR=str(tmp_path), CPU_NUM="2"),
        cwd=lh.REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    spec = importlib.util.spec_from_file_location("cpu_doc_ps_data_parallel", SCRIPT)
    doc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(doc)
    main, startup = fleet.Program(), fleet.Program()
    startup.random_seed = 6
    with fleet.program_guard(main, startup):
        loss = doc.build(fleet)
        fleet.optimizer.SGD(0.1).minimize(loss)
    exe, scope = fleet.Executor(), fleet._core.Scope()
    exe.run(startup, scope=scope)
    for step in range(doc.STEPS):
        halves = [doc.batch(step, w) for w in range(2)]
        ids = np.concatenate([np.array(h["ids"]) for h in halves])
        feed = {
            "ids": fleet.LoDTensor(ids, lengths=[[2] * (2 * doc.BATCH)]),
            "x": np.concatenate([h["x"] for h in halves]),
            "y": np.concatenate([h["y"] for h in halves]),
        }
        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    for worker in range(2):
        got = json.loads((tmp_path / f"worker.{worker}.json").read_text())
        for name in ("w1", "b1", "w2", "emb"):
            np.testing.assert_allclose(
                np.asarray(got[name], np.float32),
                np.array(scope.find_var(name).get_tensor()),
                rtol=1e-5,
                atol=1e-6,
                err_msg=f"worker {worker}: {name}",
            )
