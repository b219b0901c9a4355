"""fleet.cluster_env: Slurm's and Open MPI's variables told in Paddle's (issue 30)."""

from __future__ import annotations

import pytest

from fleet import cluster_env as ce
from fleet.errors import InvalidArgument
from fleet.role_maker import Role, role_from_environment


@pytest.mark.parametrize(
    "text, names",
    [
        ("node01", ["node01"]),
        ("node[01-03,07],gpu5", ["node01", "node02", "node03", "node07", "gpu5"]),
        ("rack[1-2]-n[8-9]", ["rack1-n8", "rack1-n9", "rack2-n8", "rack2-n9"]),
        ("10.0.0.[9-11]", ["10.0.0.9", "10.0.0.10", "10.0.0.11"]),
    ],
)
def test_compressed_host_lists_expand_in_order(text, names):
    assert ce.expand_nodelist(text) == names


@pytest.mark.parametrize("text", ["node[01-03", "node[3-1]", "node[a-b]", ""])
def test_bad_host_lists_are_refused_naming_them(text):
    with pytest.raises(InvalidArgument, match="Slurm host list"):
        ce.expand_nodelist(text)


def test_tasks_per_node_expand_their_repeat_counts():
    assert ce.expand_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    with pytest.raises(InvalidArgument, match="tasks per node"):
        ce.expand_tasks_per_node("2(3)")


SLURM = dict(
    SLURM_NTASKS="4",
    SLURM_JOB_NODELIST="n[1-3]",
    SLURM_STEP_NODELIST="n[1-3]",
    SLURM_TASKS_PER_NODE="1(x2),2",
    FLEET_PORT="7000",
)


def test_slurm_ps_job_servers_are_the_first_ranks_and_the_store_follows_worker_0():
    env = ce.paddle_environment(dict(SLURM, SLURM_PROCID="3", FLEET_SERVER_NUM="2"), False)
    assert env["PADDLE_PSERVERS_IP_PORT_LIST"] == "n1:7000,n2:7000"
    assert env["PADDLE_TRAINER_ENDPOINTS"] == "n3:7000,n3:7001"
    assert (env["TRAINING_ROLE"], env["PADDLE_TRAINER_ID"]) == ("TRAINER", "1")
    assert env["FLEET_GLOO_STORE_ENDPOINT"] == "n3:7002"
    server = ce.paddle_environment(dict(SLURM, SLURM_PROCID="1", FLEET_SERVER_NUM="2"), False)
    assert (server["TRAINING_ROLE"], server["POD_IP"], server["PADDLE_PORT"]) == (
        "PSERVER",
        "n2",
        "7000",
    )


def test_a_ps_job_without_a_server_count_says_which_variable_is_missing():
    with pytest.raises(InvalidArgument, match="FLEET_SERVER_NUM=N"):
        ce.paddle_environment(dict(SLURM, SLURM_PROCID="0"), False)


def test_slurm_cyclic_placement_is_refused_with_a_hint():
    with pytest.raises(InvalidArgument, match="--distribution=block"):
        ce.paddle_environment(dict(SLURM, SLURM_PROCID="3", SLURM_LOCALID="0"), True)


def test_open_mpi_needs_the_host_list():
    env = dict(OMPI_COMM_WORLD_RANK="0", OMPI_COMM_WORLD_SIZE="2", OMPI_COMM_WORLD_LOCAL_SIZE="1")
    with pytest.raises(InvalidArgument, match="mpirun -x FLEET_HOSTS"):
        ce.paddle_environment(env, True)


def test_fleet_init_reads_open_mpi_when_no_paddle_variable_is_set():
    env = dict(
        OMPI_COMM_WORLD_RANK="3",
        OMPI_COMM_WORLD_SIZE="4",
        OMPI_COMM_WORLD_LOCAL_RANK="1",
        OMPI_COMM_WORLD_LOCAL_SIZE="2",
        FLEET_HOSTS="h0,h1",
    )
    role = role_from_environment(True, env)
    assert role.role == Role.WORKER and role.worker_index() == 3
    assert role.worker_endpoints() == ["h0:6170", "h0:6171", "h1:6170", "h1:6171"]
    assert role.gloo.hostname == "h1"


def test_paddle_variables_win_over_the_managers():
    env = dict(
        SLURM,
        SLURM_PROCID="0",
        PADDLE_TRAINER_ID="0",
        PADDLE_TRAINER_ENDPOINTS="127.0.0.1:6170",
        PADDLE_CURRENT_ENDPOINT="127.0.0.1:6170",
    )
    assert role_from_environment(True, env).worker_endpoints() == ["127.0.0.1:6170"]


def test_a_script_run_directly_in_an_sbatch_allocation_is_not_a_task():
    batch_step = dict(SLURM_PROCID="0", SLURM_NTASKS="4", SLURM_JOB_NODELIST="n[1-2]")
    assert ce.paddle_environment(batch_step, True) is None
    assert not ce.started_by_a_manager(batch_step)
