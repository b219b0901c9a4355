"""Role makers and the fleet facade, without starting processes."""

from __future__ import annotations

import numpy as np
import pytest

from fleet.base.fleet_base import Fleet
from fleet.errors import InvalidArgument
from fleet.role_maker import GlooConfig, PaddleCloudRoleMaker, Role, UserDefinedRoleMaker

SERVERS = "127.0.0.1:6170,127.0.0.1:6171"


def ps_env(**extra: str) -> dict[str, str]:
    env = {"PADDLE_PSERVERS_IP_PORT_LIST": SERVERS, "PADDLE_TRAINERS_NUM": "3"}
    env.update(extra)
    return env


def collective_env(**extra: str) -> dict[str, str]:
    env = {
        "PADDLE_TRAINER_ENDPOINTS": "127.0.0.1:7000,127.0.0.1:7001",
        "PADDLE_TRAINER_ID": "1",
        "PADDLE_CURRENT_ENDPOINT": "127.0.0.1:7001",
    }
    env.update(extra)
    return env


def test_ps_trainer_from_environment():
    role = PaddleCloudRoleMaker(
        environ=ps_env(
            TRAINING_ROLE="TRAINER",
            PADDLE_TRAINER_ID="2",
            FLEET_GLOO_STORE_ENDPOINT="127.0.0.1:6180",
            FLEET_GLOO_TIMEOUT_S="7.5",
            POD_IP="127.0.0.1",
        )
    )
    assert role.is_worker() and not role.is_server() and not role.is_first_worker()
    assert (role.worker_index(), role.worker_num(), role.server_num()) == (2, 3, 2)
    assert role.server_endpoints() == SERVERS.split(",")
    assert role.worker_endpoints() == []
    assert role.gloo == GlooConfig(
        store_endpoint="127.0.0.1:6180", hostname="127.0.0.1", timeout_s=7.5
    )
    with pytest.raises(InvalidArgument, match="this process is worker 2, not a server"):
        role.server_index()


def test_ps_server_finds_its_index_from_its_own_endpoint():
    role = PaddleCloudRoleMaker(
        environ=ps_env(TRAINING_ROLE="PSERVER", POD_IP="127.0.0.1", PADDLE_PORT="6171")
    )
    assert role.is_server() and not role.is_worker() and not role.is_first_worker()
    assert role.server_index() == 1 and role.role == Role.SERVER
    with pytest.raises(InvalidArgument, match="this process is server 1, not a worker"):
        role.worker_index()


def test_collective_from_environment():
    role = PaddleCloudRoleMaker(is_collective=True, environ=collective_env())
    assert role.is_collective and role.is_worker() and role.worker_index() == 1
    assert role.worker_num() == 2 and role.server_num() == 0
    assert role.gloo.hostname == "127.0.0.1"


@pytest.mark.parametrize(
    "env, message",
    [
        (ps_env(TRAINING_ROLE="TRAINER"), "PADDLE_TRAINER_ID is not set"),
        (
            {"TRAINING_ROLE": "TRAINER", "PADDLE_TRAINER_ID": "0"},
            "PADDLE_PSERVERS_IP_PORT_LIST is not set",
        ),
        (ps_env(TRAINING_ROLE="HETER"), "TRAINING_ROLE='HETER' is neither PSERVER nor TRAINER"),
        (
            ps_env(TRAINING_ROLE="TRAINER", PADDLE_TRAINER_ID="3"),
            "PADDLE_TRAINER_ID=3 is not below PADDLE_TRAINERS_NUM=3",
        ),
        (ps_env(TRAINING_ROLE="TRAINER", PADDLE_TRAINER_ID="x"), "PADDLE_TRAINER_ID='x' is not an"),
        (
            ps_env(TRAINING_ROLE="PSERVER", POD_IP="127.0.0.1", PADDLE_PORT="6999"),
            "127.0.0.1:6999 is not in PADDLE_PSERVERS_IP_PORT_LIST",
        ),
        (
            ps_env(
                TRAINING_ROLE="TRAINER",
                PADDLE_TRAINER_ID="0",
                PADDLE_TRAINER_ENDPOINTS="127.0.0.1:1",
            ),
            "has 1 entries but PADDLE_TRAINERS_NUM=3",
        ),
        (
            ps_env(
                TRAINING_ROLE="TRAINER",
                PADDLE_TRAINER_ID="0",
                PADDLE_PSERVERS_IP_PORT_LIST="127.0.0.1",
            ),
            "bad endpoint '127.0.0.1'",
        ),
        (
            ps_env(TRAINING_ROLE="TRAINER", PADDLE_TRAINER_ID="0", FLEET_GLOO_TIMEOUT_S="soon"),
            "FLEET_GLOO_TIMEOUT_S='soon' is not a number",
        ),
    ],
)
def test_ps_environment_errors_list_found_and_expected(env, message):
    with pytest.raises(InvalidArgument) as info:
        PaddleCloudRoleMaker(environ=env)
    text = str(info.value)
    assert message in text
    assert "found: " in text and "TRAINING_ROLE=" in text.split("found: ")[1]
    assert "expected: TRAINING_ROLE=PSERVER|TRAINER" in text


def test_empty_environment_says_nothing_was_found():
    with pytest.raises(InvalidArgument, match="found: none of them"):
        PaddleCloudRoleMaker(environ={})


@pytest.mark.parametrize(
    "env, message",
    [
        (
            collective_env(PADDLE_CURRENT_ENDPOINT="127.0.0.1:7000"),
            "PADDLE_CURRENT_ENDPOINT=127.0.0.1:7000 is not entry 1",
        ),
        (collective_env(PADDLE_TRAINER_ID="2"), "PADDLE_TRAINER_ID=2 is outside the 2 entries"),
        (collective_env(PADDLE_TRAINERS_NUM="4"), "PADDLE_TRAINERS_NUM=4 but"),
        (
            collective_env(PADDLE_TRAINER_ENDPOINTS="127.0.0.1:7000,127.0.0.1:7000"),
            "lists 127.0.0.1:7000 more than once",
        ),
    ],
)
def test_collective_environment_errors(env, message):
    with pytest.raises(InvalidArgument, match="expected: PADDLE_TRAINER_ID") as info:
        PaddleCloudRoleMaker(is_collective=True, environ=env)
    assert message in str(info.value)


def test_user_defined_role_maker():
    role = UserDefinedRoleMaker(
        current_id=0, role=Role.SERVER, worker_num=4, server_endpoints=SERVERS.split(",")
    )
    assert role.is_server() and role.server_index() == 0 and role.worker_num() == 4
    worker = UserDefinedRoleMaker(current_id=0, role=Role.WORKER, worker_num=2)
    assert worker.is_first_worker() and worker.server_num() == 0
    with pytest.raises(InvalidArgument, match="worker index 2 is outside 0..1"):
        UserDefinedRoleMaker(current_id=2, role=Role.WORKER, worker_num=2)
    with pytest.raises(InvalidArgument, match="server index 2 is outside"):
        UserDefinedRoleMaker(current_id=2, role=Role.SERVER, server_endpoints=SERVERS.split(","))
    with pytest.raises(InvalidArgument, match="bad endpoint 'nohost'"):
        UserDefinedRoleMaker(server_endpoints=["nohost"])
    with pytest.raises(InvalidArgument, match="a collective job has no servers"):
        UserDefinedRoleMaker(role=Role.SERVER, server_endpoints=["127.0.0.1:1"], is_collective=True)
    with pytest.raises(InvalidArgument, match="timeout_s must be positive"):
        GlooConfig(timeout_s=0)


def test_fleet_facade_queries_and_single_worker_util():
    fleet = Fleet()
    with pytest.raises(InvalidArgument, match=r"fleet.init\(\) has not been called"):
        fleet.is_worker()
    fleet.init(
        UserDefinedRoleMaker(
            current_id=0, role=Role.WORKER, worker_num=1, server_endpoints=SERVERS.split(",")
        )
    )
    assert fleet.is_worker() and fleet.is_first_worker() and fleet.worker_index() == 0
    assert fleet.server_endpoints(to_string=True) == SERVERS
    # One worker needs no store: its group lives in the process.
    np.testing.assert_array_equal(
        fleet.util.all_reduce(np.arange(4, dtype=np.int32), "max"), np.arange(4, dtype=np.int32)
    )
    assert fleet.util.all_gather({"a": 1}) == [{"a": 1}]
    fleet.barrier_worker()
    with pytest.raises(InvalidArgument, match="mode 'mean' is not one of"):
        fleet.util.all_reduce(np.ones(2), mode="mean")
    with pytest.raises(InvalidArgument, match="dtype bool is not supported"):
        fleet.util.all_reduce(np.ones(2, dtype=bool))
    with pytest.raises(InvalidArgument, match="comm_world='server'"):
        fleet.util.barrier(comm_world="server")


def test_util_refuses_servers_and_missing_store():
    fleet = Fleet()
    fleet.init(
        UserDefinedRoleMaker(current_id=0, role=Role.SERVER, server_endpoints=["127.0.0.1:6170"])
    )
    with pytest.raises(InvalidArgument, match="this process is server 0"):
        fleet.barrier_worker()
    fleet.init(UserDefinedRoleMaker(current_id=0, role=Role.WORKER, worker_num=2))
    with pytest.raises(
        InvalidArgument, match="needs a rendezvous store: set FLEET_GLOO_STORE_ENDPOINT"
    ):
        fleet.util.barrier()
