"""fleet.DistributeTranspiler: the same plan as distributed_optimizer, dense placement as the
config says (as the servers' tables report it), the manual's pserver example run by hand in
sync mode giving the parameters of one process at the job's total batch, and its errors."""

import importlib.util
import json
import os
import pathlib
import socket
import subprocess
import sys

import numpy as np
import pytest

import fleet
from fleet import layers
from fleet.errors import InvalidArgument
from fleet.ps.client import PsClient
from fleet.ps.config import server_config
from fleet.ps.server import start_server
from fleet.role_maker import Role, UserDefinedRoleMaker
from fleet.transpiler import DistributeTranspiler, DistributeTranspilerConfig, HashName, RoundRobin
from fleet.transpiler.distribute_transpiler import PserverProgram
from tests.python.e2e import launch_helpers as lh

REPO_ROOT = pathlib.Path(__file__).resolve().parents[3]
MANUAL = REPO_ROOT / "tests" / "python" / "e2e" / "scripts" / "transpiler_manual.py"
NCCL2 = MANUAL.parent / "transpiler_nccl2.py"
SERVERS = "127.0.0.1:6170,127.0.0.1:6171"


def _model(sizes=(8, 8, 1)):
    main, startup = fleet.Program(), fleet.Program()
    startup.random_seed = 3
    with fleet.program_guard(main, startup):
        x = layers.data("x", [6])
        y = layers.data("y", [1])
        ids = layers.data("ids", [1], dtype="int64", lod_level=1)
        emb = layers.embedding(
            ids, [100, 4], is_sparse=True, param_attr=fleet.ParamAttr(name="emb")
        )
        h = layers.concat([x, layers.sequence_pool(emb, "sum")], axis=1)
        for i, size in enumerate(sizes):
            h = layers.fc(h, size, param_attr=f"w{i}", bias_attr=f"b{i}")
        diff = layers.elementwise_sub(h, y)
        loss = layers.mean(layers.elementwise_mul(diff, diff))
    return main, startup, loss


def _transpiled(config=None, trainers=2, trainer_id=0, pservers=SERVERS, optimizer=None):
    main, startup, loss = _model()
    with fleet.program_guard(main, startup):
        (optimizer or fleet.optimizer.Adam(0.01)).minimize(loss)
    t = DistributeTranspiler(config)
    t.transpile(
        trainer_id, program=main, pservers=pservers, trainers=trainers, startup_program=startup
    )
    return t, main, startup


def test_transpile_makes_the_plan_distributed_optimizer_makes():
    t, main, startup = _transpiled()
    ref_main, ref_startup, loss = _model()
    facade = fleet.fleet_api.Fleet()
    facade.init(
        UserDefinedRoleMaker(
            current_id=0, role=Role.WORKER, worker_num=2, server_endpoints=SERVERS.split(",")
        )
    )
    with fleet.program_guard(ref_main, ref_startup):
        facade.distributed_optimizer(
            fleet.optimizer.Adam(0.01), fleet.DistributedStrategyFactory.create_sync_strategy()
        ).minimize(loss)
    plan, ref = t.plan, facade.ps_plan
    assert [c.SerializeToString() for c in plan.table_configs()][:-1] == [
        c.SerializeToString() for c in ref.table_configs()
    ][:-1]
    assert [(d.param, d.grad, d.numel) for d in plan.dense] == [
        (d.param, d.grad, d.numel) for d in ref.dense
    ]
    assert [op.type for op in main.global_block().ops] == [
        op.type for op in ref_main.global_block().ops
    ]
    assert [op.type for op in startup.global_block().ops] == [
        op.type for op in ref_startup.global_block().ops
    ]


@pytest.mark.parametrize(
    "settings, mode",
    [
        ({}, "sync"),
        ({"sync_mode": False}, "async"),
        ({"sync_mode": False, "half_async": True}, "half_async"),
        ({"geo_sgd_mode": True, "geo_sgd_need_push_nums": 7}, "geo"),
    ],
)
def test_config_picks_the_parameter_server_mode(settings, mode):
    config = DistributeTranspilerConfig()
    for key, value in settings.items():
        setattr(config, key, value)
    t, _, _ = _transpiled(config)
    assert t.plan.mode.value == mode
    if mode == "geo":
        assert t.plan.strategy.async_config.k_steps == 7


def _servers_report(plan, endpoints):
    """Starts one real server per endpoint with the plan's tables; returns what each one's
    dense table reports (its blocks and bytes)."""
    servers = [
        start_server(server_config(i, len(endpoints), plan.table_configs()), "127.0.0.1:0")
        for i in range(len(endpoints))
    ]
    try:
        with PsClient([s.endpoint for s in servers]) as client:
            stats = client.stats()
    finally:
        for s in servers:
            s.shutdown(1.0)
    dense_id = plan.dense_config.table_id
    return [next(t for t in tables if t.table_id == dense_id) for tables in stats]


def _numels():
    # w0: (6 + 4) x 8, b0: 8, w1: 8 x 8, b1: 8, w2: 8 x 1, b2: 1
    return {"w0": 80, "b0": 8, "w1": 64, "b1": 8, "w2": 8, "b2": 1}


def test_sliced_dense_parameters_are_blocks_of_min_block_size_round_robin():
    config = DistributeTranspilerConfig()
    config.min_block_size = 16
    t, _, _ = _transpiled(config, pservers="127.0.0.1:6170,127.0.0.1:6171,127.0.0.1:6172")
    total = sum(_numels().values())  # 169 elements: 11 blocks of 16 (the last of 9)
    assert t.plan.dense_config.dense_block_size == 16
    report = _servers_report(t.plan, ["a:1", "b:2", "c:3"])
    assert [r.rows for r in report] == [4, 4, 3]
    assert sum(r.rows for r in report) == -(-total // 16)


@pytest.mark.parametrize("method", [RoundRobin, HashName])
def test_whole_dense_variables_go_where_split_method_puts_them(method):
    config = DistributeTranspilerConfig()
    config.slice_var_up = False
    config.split_method = method
    endpoints = ["127.0.0.1:6170", "127.0.0.1:6171"]
    t, _, _ = _transpiled(config, pservers=",".join(endpoints))
    plan = t.plan
    names = [d.param for d in plan.dense]
    expected = method(endpoints).dispatch(names)
    block = plan.dense_config.dense_block_size
    assert block == max(_numels().values())
    for dense, endpoint in zip(plan.dense, expected):
        first, last = dense.offset // block, (dense.offset + dense.numel - 1) // block
        assert first == last, f"{dense.param} crosses a block"
        assert endpoints[first % 2] == endpoint, dense.param
    report = _servers_report(plan, endpoints)
    per_server = [
        {(d.offset // block) for d, e in zip(plan.dense, expected) if e == ep} for ep in endpoints
    ]
    # Each server holds its own variables' blocks (and the table's trailing block, if any).
    blocks = plan.dense_config.dim // block
    owned = [len(range(s, blocks, 2)) for s in range(2)]
    assert [r.rows for r in report] == owned
    for s, used in enumerate(per_server):
        assert all(b % 2 == s for b in used)


def test_errors_name_the_value_at_fault(monkeypatch):
    main, startup, loss = _model()
    with fleet.program_guard(main, startup):
        fleet.optimizer.SGD(0.1).minimize(loss)
    t = DistributeTranspiler()
    with pytest.raises(InvalidArgument, match="trainer_id 2 is out of range for 2 trainers"):
        t.transpile(2, program=main, pservers=SERVERS, trainers=2, startup_program=startup)
    t.transpile(1, program=main, pservers=SERVERS, trainers=2, startup_program=startup)
    with pytest.raises(InvalidArgument, match="'127.0.0.1:7000' is not one of the pservers"):
        t.get_pserver_program("127.0.0.1:7000")
    with pytest.raises(InvalidArgument, match="get_pserver_programs: endpoint '127.0.0.1:7000'"):
        t.get_pserver_programs("127.0.0.1:7000")
    pserver = t.get_pserver_program("127.0.0.1:6171")
    # get_pserver_programs: that server's program and its startup program, in one call.
    pair_program, pair_startup = t.get_pserver_programs("127.0.0.1:6171")
    assert isinstance(pair_program, PserverProgram) and pair_program.server_index == 1
    assert isinstance(pair_startup, fleet.Program) and not isinstance(pair_startup, PserverProgram)
    monkeypatch.setenv("PADDLE_TRAINING_ROLE", "TRAINER")  # as the manual's scripts set it
    with pytest.raises(InvalidArgument, match="run in a trainer process"):
        fleet.Executor().run(pserver)


def _free_port():
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _one_process_reference():
    spec = importlib.util.spec_from_file_location("transpiler_manual", MANUAL)
    manual = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(manual)
    main, startup = fleet.Program(), fleet.Program()
    startup.random_seed = 9
    with fleet.program_guard(main, startup):
        loss = manual.build(fleet)
    exe, scope = fleet.Executor(), fleet._core.Scope()
    exe.run(startup, scope=scope)
    for step in range(manual.STEPS):
        halves = [manual.batch(step, trainer) for trainer in range(2)]
        ids = np.concatenate([np.array(h["ids"]) for h in halves])
        feed = {
            "x": np.concatenate([h["x"] for h in halves]),
            "y": np.concatenate([h["y"] for h in halves]),
            "ids": fleet.LoDTensor(ids, lengths=[[2] * (2 * manual.HALF_BATCH)]),
        }
        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    return {n: np.array(scope.find_var(n).get_tensor()) for n in ("w1", "b1", "w2", "emb")}


def test_manual_pserver_example_in_sync_mode_matches_one_process(tmp_path):
    port = _free_port()
    ips = ["127.0.0.1", "127.0.0.2"]
    base = dict(
        os.environ,
        PYTHONPATH=str(REPO_ROOT),
        OUT_DIR=str(tmp_path),
        OPENBLAS_NUM_THREADS="1",
        PADDLE_PSERVER_PORT=str(port),
        PADDLE_PSERVER_IPS=",".join(ips),
        PADDLE_TRAINERS="2",
    )
    procs = []
    try:
        for ip in ips:
            env = dict(base, PADDLE_TRAINING_ROLE="PSERVER", PADDLE_CURRENT_IP=ip)
            procs.append(subprocess.Popen([sys.executable, str(MANUAL)], env=env))
        for trainer in range(2):
            env = dict(base, PADDLE_TRAINING_ROLE="TRAINER", PADDLE_TRAINER_ID=str(trainer))
            procs.append(subprocess.Popen([sys.executable, str(MANUAL)], env=env))
        codes = [p.wait(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert codes == [0, 0, 0, 0]
    _check_trainers(tmp_path)


def _check_trainers(out_dir):
    reference = _one_process_reference()
    for trainer in range(2):
        got = json.loads((out_dir / f"trainer.{trainer}.json").read_text())
        for name, value in reference.items():
            np.testing.assert_allclose(
                np.asarray(got[name], np.float32), value, rtol=1e-5, atol=1e-5, err_msg=name
            )


def test_manual_pserver_example_runs_under_fleetrun(tmp_path):
    """fleetrun sets the manual's variables too (one server: its port is PADDLE_PSERVER_PORT)."""
    result = subprocess.run(
        lh.launcher_command(["--server_num=1", "--worker_num=2"], MANUAL),
        env=lh.job_env(tmp_path, OUT_DIR=str(tmp_path)),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    _check_trainers(tmp_path)


@pytest.mark.parametrize("mode", ["nccl2", "collective"])
def test_nccl2_and_collective_modes_train_the_collective_program_over_gloo(tmp_path, mode):
    """Two trainers started by hand, mode "nccl2" (or "collective"): the programs get the
    collective pass (rank 0's parameters broadcast, gradients all-reduced) and both trainers end
    with the parameters of one process on the job's total batch."""
    endpoints = [f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"]
    procs = []
    try:
        for trainer in range(2):
            env = dict(
                os.environ,
                PYTHONPATH=str(REPO_ROOT),
                OUT_DIR=str(tmp_path),
                OPENBLAS_NUM_THREADS="1",
                PADDLE_TRAINER_ID=str(trainer),
                PADDLE_TRAINER_ENDPOINTS=",".join(endpoints),
                PADDLE_CURRENT_ENDPOINT=endpoints[trainer],
                TRANSPILER_MODE=mode,
            )
            for name in ("FLEET_GLOO_STORE_PATH", "FLEET_GLOO_STORE_ENDPOINT", "FLEET_JOB_ID"):
                env.pop(name, None)
            procs.append(subprocess.Popen([sys.executable, str(NCCL2)], env=env))
        codes = [p.wait(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert codes == [0, 0]
    ops = json.loads((tmp_path / "trainer.0.json").read_text())["ops"]
    assert "c_broadcast" in ops and any(op.startswith("c_allreduce") for op in ops)
    _check_trainers(tmp_path)
