"""fleetrun's option checks and job layout (which processes start here, with which environment),
without starting processes."""

from __future__ import annotations

import pytest

from fleet.errors import InvalidArgument
from fleet.launch.args import parse_args
from fleet.launch.plan import HeldPorts, build_plan
from fleet.role_maker import PaddleCloudRoleMaker


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "train.py"
    path.write_text("")
    return str(path)


def ports_from(start: int):
    """A deterministic port picker: consecutive ports from `start`."""
    state = {"next": start}

    def pick(host: str, count: int) -> list[int]:
        first = state["next"]
        state["next"] += count
        return list(range(first, first + count))

    return pick


def plan(argv, addresses=None, environ=None, start=7000):
    args = parse_args(argv)
    return build_plan(args, environ or {}, addresses or {"127.0.0.1"}, ports_from(start))


def test_ps_on_one_machine_gets_free_ports_and_role_environment(script):
    job = plan(["--server_num=2", "--worker_num=2", script, "--lr", "0.1"])
    assert job.mode == "ps" and job.command[-3:] == [script, "--lr", "0.1"]
    assert [p.name for p in job.procs] == ["server.0", "server.1", "worker.0", "worker.1"]
    server_env = job.procs[1].env
    assert server_env["PADDLE_PSERVERS_IP_PORT_LIST"] == "127.0.0.1:7000,127.0.0.1:7001"
    assert server_env["TRAINING_ROLE"] == "PSERVER" and server_env["PADDLE_PORT"] == "7001"
    assert server_env["FLEET_GLOO_STORE_ENDPOINT"] == "127.0.0.1:7004"
    # Every process's environment gives the role maker the role the plan meant.
    for proc in job.procs:
        role = PaddleCloudRoleMaker(environ=proc.env)
        assert role.is_server() == (proc.role == "server")
        index = role.server_index() if role.is_server() else role.worker_index()
        assert index == proc.rank and role.worker_num() == 2 and role.server_num() == 2
    assert job.procs[3].env["PADDLE_CURRENT_ENDPOINT"] == "127.0.0.1:7003"


def test_held_ports_differ_across_calls_until_closed():
    """The servers', workers' and store's ports are picked by separate calls: while held, a
    later call cannot get an earlier call's port back from the OS."""
    held = HeldPorts()
    try:
        picked = [held("127.0.0.1", 20) for _ in range(5)]
    finally:
        held.close()
    flat = [port for call in picked for port in call]
    assert len(set(flat)) == len(flat) == 100


def test_a_ps_job_on_free_ports_gives_every_process_and_the_store_its_own_port(script):
    args = parse_args(["--server_num=4", "--worker_num=12", script])
    job = build_plan(args, {}, {"127.0.0.1"})  # the default picker: free ports, held
    endpoints = [p.env["PADDLE_PORT"] for p in job.procs]
    endpoints.append(job.procs[0].env["FLEET_GLOO_STORE_ENDPOINT"].rsplit(":", 1)[1])
    assert len(set(endpoints)) == len(endpoints) == 17


def test_ps_across_machines_starts_only_this_machines_processes(script):
    servers = "--servers=10.0.0.1:6170,10.0.0.2:6170"
    workers = "--workers=10.0.0.1:6171,10.0.0.2:6171"
    job = plan([servers, workers, "--store_port=6180", script], addresses={"10.0.0.2"})
    assert [p.name for p in job.procs] == ["server.1", "worker.1"]
    assert job.procs[1].env["FLEET_GLOO_STORE_ENDPOINT"] == "10.0.0.1:6180"
    assert job.procs[1].env["POD_IP"] == "10.0.0.2"
    # --host overrides the address matching.
    job = plan(
        [servers, workers, "--store_port=6180", "--host=10.0.0.1", script], addresses={"10.0.0.2"}
    )
    assert [p.name for p in job.procs] == ["server.0", "worker.0"]
    with pytest.raises(InvalidArgument, match="none of the endpoints .* hint: pass --host"):
        plan([servers, workers, "--store_port=6180", script], addresses={"10.9.9.9"})
    with pytest.raises(InvalidArgument, match="hint: add --store_port"):
        plan([servers, workers, script], addresses={"10.0.0.2"})
    # A shared file store replaces the TCP store and its port.
    job = plan(
        [servers, workers, script],
        addresses={"10.0.0.2"},
        environ={"FLEET_GLOO_STORE_PATH": "/shared/job"},
    )
    assert "FLEET_GLOO_STORE_ENDPOINT" not in job.procs[1].env


def test_collective_gpus_one_process_per_gpu(script):
    job = plan(["--gpus=2,3", script])
    assert job.mode == "collective" and [p.name for p in job.procs] == ["worker.0", "worker.1"]
    env = job.procs[1].env
    assert env["CUDA_VISIBLE_DEVICES"] == "3" and env["FLAGS_selected_gpus"] == "0"
    assert env["PADDLE_TRAINER_ENDPOINTS"] == "127.0.0.1:7000,127.0.0.1:7001"
    role = PaddleCloudRoleMaker(is_collective=True, environ=env)
    assert role.worker_index() == 1 and role.worker_num() == 2


def test_collective_across_machines_uses_fixed_ports_and_global_ranks(script):
    job = plan(
        [
            "--ips=10.0.0.1,10.0.0.2",
            "--nproc_per_node=2",
            "--collective",
            "--started_port=6170",
            script,
        ],
        addresses={"10.0.0.2"},
    )
    assert [p.rank for p in job.procs] == [2, 3]
    env = job.procs[0].env
    assert env["PADDLE_TRAINER_ENDPOINTS"] == (
        "10.0.0.1:6170,10.0.0.1:6171,10.0.0.2:6170,10.0.0.2:6171"
    )
    assert env["PADDLE_CURRENT_ENDPOINT"] == "10.0.0.2:6170"
    assert env["FLEET_GLOO_STORE_ENDPOINT"] == "10.0.0.1:6172"
    assert "CUDA_VISIBLE_DEVICES" not in env
    with pytest.raises(InvalidArgument, match="cannot tell which of --ips"):
        plan(["--ips=10.0.0.1,10.0.0.2", script], addresses={"127.0.0.1"})


def test_cpu_collective_default_is_one_process(script):
    job = plan([script])
    assert job.mode == "collective" and [p.name for p in job.procs] == ["worker.0"]


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "no training script given"),
        (["--server_num=1", "--worker_num=1", "missing.py"], "does not exist"),
        (["--server_num=0", "--worker_num=1", "SCRIPT"], "--server_num=0: must be at least 1"),
        (["--servers=127.0.0.1:1,127.0.0.1:1", "--worker_num=1", "SCRIPT"], "more than once"),
        (["--servers=127.0.0.1:99999", "--worker_num=1", "SCRIPT"], "bad endpoint"),
        (
            ["--workers=127.0.0.1:1", "--worker_num=2", "--server_num=1", "SCRIPT"],
            "--workers lists 1 endpoints but --worker_num=2",
        ),
        (["--server_num=1", "SCRIPT"], "needs workers; hint: add --worker_num"),
        (["--worker_num=1", "--collective", "SCRIPT"], "cannot be combined"),
        (["--gpus=0,1", "--nproc_per_node=3", "SCRIPT"], "one process per GPU"),
        (["--gpus=a", "SCRIPT"], "expected distinct GPU ids"),
        (["--ips=10.0.0.1,10.0.0.1", "SCRIPT"], "more than once"),
    ],
)
def test_bad_options_are_errors_with_hints(script, argv, message):
    argv = [script if a == "SCRIPT" else a for a in argv]
    with pytest.raises(InvalidArgument, match=message):
        parse_args(argv)
