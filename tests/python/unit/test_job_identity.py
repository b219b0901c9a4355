"""The job identity (issue 29): where a process's job id comes from (fleet.role_maker) and which
one fleetrun gives the processes it starts (fleet.launch.plan)."""

from __future__ import annotations

import argparse

from fleet.launch.args import parse_args
from fleet.launch.plan import build_plan
from fleet.role_maker import PaddleCloudRoleMaker, UserDefinedRoleMaker

PS_ENV = {
    "TRAINING_ROLE": "TRAINER",
    "PADDLE_PSERVERS_IP_PORT_LIST": "127.0.0.1:7000",
    "PADDLE_TRAINERS_NUM": "2",
    "PADDLE_TRAINER_ID": "1",
}


def test_fleet_job_id_wins_then_a_cluster_managers_then_a_digest_of_the_endpoints():
    assert PaddleCloudRoleMaker(environ=dict(PS_ENV, FLEET_JOB_ID="j1")).job_id == "j1"
    slurm = dict(PS_ENV, SLURM_JOB_ID="42")
    assert PaddleCloudRoleMaker(environ=slurm).job_id == "SLURM_JOB_ID=42"
    derived = PaddleCloudRoleMaker(environ=PS_ENV).job_id
    assert derived.startswith("endpoints-")
    # Every process of the job derives the same one; another job's endpoints give another.
    server = dict(PS_ENV, TRAINING_ROLE="PSERVER", POD_IP="127.0.0.1", PADDLE_PORT="7000")
    assert PaddleCloudRoleMaker(environ=server).job_id == derived
    other = dict(PS_ENV, PADDLE_PSERVERS_IP_PORT_LIST="127.0.0.1:7001")
    assert PaddleCloudRoleMaker(environ=other).job_id != derived


def test_a_user_defined_role_takes_a_job_id_or_derives_one():
    assert UserDefinedRoleMaker(job_id="mine").job_id == "mine"
    a = UserDefinedRoleMaker(server_endpoints=["127.0.0.1:7000"], worker_num=2)
    b = UserDefinedRoleMaker(server_endpoints=["127.0.0.1:7000"], worker_num=2, current_id=1)
    assert a.job_id == b.job_id and a.job_id.startswith("endpoints-")


def _plan(argv: list[str], environ: dict[str, str]):
    args: argparse.Namespace = parse_args([*argv, __file__])  # any existing script
    ports = iter(range(7000, 7100))
    return build_plan(
        args,
        environ,
        {"127.0.0.1"},
        lambda host, n: [next(ports) for _ in range(n)],
        make_job_id=lambda: "fresh",
    )


def test_fleetrun_gives_a_one_machine_job_a_fresh_id_and_keeps_a_given_one():
    plan = _plan(["--server_num=1", "--worker_num=2"], {})
    assert {p.env["FLEET_JOB_ID"] for p in plan.procs} == {"fresh"}
    given = _plan(["--collective", "--nproc_per_node=2"], {"FLEET_JOB_ID": "given"})
    assert all("FLEET_JOB_ID" not in p.env for p in given.procs)  # inherited as it is
    managed = _plan(["--server_num=1", "--worker_num=1"], {"PADDLE_JOB_ID": "cluster"})
    assert all("FLEET_JOB_ID" not in p.env for p in managed.procs)


def test_fleetrun_leaves_a_several_machine_job_to_derive_its_id():
    plan = _plan(
        [
            "--servers=127.0.0.1:6170,10.0.0.2:6170",
            "--workers=127.0.0.1:6171,10.0.0.2:6171",
            "--store_port=6180",
        ],
        {},
    )
    assert plan.procs and all("FLEET_JOB_ID" not in p.env for p in plan.procs)
