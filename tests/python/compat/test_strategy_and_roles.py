"""The strategy and role-maker surface of Paddle 1.x and 2.x scripts: the 1.x strategy accessors,
2.x a_sync_configs as Paddle prints them, role makers by their Paddle names and keywords,
fleet.util.get_file_shard, and fleet.init() without a launcher."""

from __future__ import annotations

import pathlib
import shutil

import pytest

import fleet
from fleet import errors, role_maker
from fleet.base.fleet_base import Fleet
from tests.python.compat import jobs

# strategy.a_sync_configs as Paddle 2.6.2 prints it for a fresh strategy.
PADDLE_262_A_SYNC_CONFIGS = {
    "k_steps": -1,
    "max_merge_var_num": 1,
    "send_queue_size": 16,
    "independent_recv_thread": False,
    "min_send_grad_num_before_recv": 1,
    "thread_pool_size": 1,
    "send_wait_times": 1,
    "runtime_split_send_recv": False,
    "launch_barrier": True,
    "heter_worker_device_guard": "cpu",
    "lr_decay_steps": 10,
    "use_ps_gpu": 0,
    "use_gpu_graph": 0,
}


def test_paddle_printed_a_sync_configs_can_be_assigned_back():
    strategy = fleet.DistributedStrategy()
    strategy.a_sync = True
    strategy.a_sync_configs = dict(PADDLE_262_A_SYNC_CONFIGS)
    assert strategy.mode.value == "async"  # k_steps -1: Paddle's "not GEO"
    configs = strategy.a_sync_configs
    for key in ("send_queue_size", "max_merge_var_num", "lr_decay_steps", "use_ps_gpu"):
        assert configs[key] == PADDLE_262_A_SYNC_CONFIGS[key]
    strategy.a_sync_configs = {"k_steps": 8}
    assert strategy.mode.value == "geo"


def test_a_sync_configs_still_refuse_an_unknown_key_or_a_bad_value():
    strategy = fleet.DistributedStrategy()
    with pytest.raises(errors.InvalidArgument, match="unknown key 'send_queue_sise'"):
        strategy.a_sync_configs = {"send_queue_sise": 4}
    with pytest.raises(errors.InvalidArgument, match="k_steps"):
        strategy.a_sync_configs = {"k_steps": -2}


def test_1x_program_config_accessors():
    strategy = fleet.DistributedStrategyFactory.create_async_strategy()
    config = strategy.get_program_config()
    assert (config.slice_var_up, config.split_method, config.min_block_size) == (
        True,
        "RoundRobin",
        8192,
    )
    strategy.set_program_config({"min_block_size": 1024, "split_method": "HashName"})
    assert strategy.get_program_config().min_block_size == 1024
    config = strategy.get_program_config()
    config.slice_var_up = False
    strategy.set_program_config(config)
    assert strategy.get_program_config().slice_var_up is False
    with pytest.raises(errors.InvalidArgument, match="no setting 'min_blok_size'"):
        strategy.set_program_config({"min_blok_size": 4})


def test_1x_runtime_config_accessors():
    strategy = fleet.DistributedStrategyFactory.create_async_strategy()
    trainer = strategy.get_trainer_runtime_config()
    assert trainer.runtime_configs["communicator_send_queue_size"] == str(
        strategy.a_sync_configs["send_queue_size"]
    )
    strategy.set_trainer_runtime_config(
        {"communicator_send_queue_size": "4", "communicator_max_merge_var_num": "2"}
    )
    assert strategy.a_sync_configs["send_queue_size"] == 4
    assert strategy.a_sync_configs["max_merge_var_num"] == 2
    server = strategy.get_server_runtime_config()
    server._rpc_send_thread_num = 4
    strategy.set_server_runtime_config(server)
    assert strategy.get_server_runtime_config()._rpc_send_thread_num == 4
    assert strategy.get_build_strategy() is not None
    assert strategy.get_execute_strategy() is not None
    strategy.set_build_strategy(strategy.get_build_strategy())
    strategy.set_execute_strategy(strategy.get_execute_strategy())


def test_role_makers_by_their_paddle_names_and_keywords():
    assert fleet.UserDefinedRoleMaker is role_maker.UserDefinedRoleMaker
    assert fleet.PaddleCloudRoleMaker is role_maker.PaddleCloudRoleMaker
    server = fleet.UserDefinedRoleMaker(
        is_collective=False,
        init_gloo=False,
        current_id=0,
        role=fleet.Role.SERVER,
        worker_num=2,
        server_endpoints=["127.0.0.1:36011"],
    )
    assert server.is_server() and server.server_num() == 1 and server.worker_num() == 2
    worker = role_maker.UserDefinedRoleMaker(
        current_id=1, role=role_maker.Role.WORKER, worker_num=2, server_endpoints=["127.0.0.1:1"]
    )
    assert worker.worker_index() == 1 and not worker.is_first_worker()
    collective = role_maker.UserDefinedCollectiveRoleMaker(
        current_id=1, worker_endpoints=["127.0.0.1:7000", "127.0.0.1:7001"]
    )
    assert collective.is_collective and collective.worker_num() == 2
    assert collective.worker_index() == 1
    with pytest.raises(errors.InvalidArgument, match="no_such_keyword"):
        fleet.UserDefinedRoleMaker(no_such_keyword=1)


@pytest.mark.parametrize(
    "files, workers, expected",
    [
        (["a", "b", "c", "d", "e"], 2, [["a", "b", "c"], ["d", "e"]]),
        (["a", "b", "c", "d"], 2, [["a", "b"], ["c", "d"]]),
        (["a"], 3, [["a"], [], []]),
    ],
)
def test_get_file_shard_splits_as_paddle_does(files, workers, expected):
    shards = []
    for index in range(workers):
        job = Fleet()  # as fleet.util of worker `index` (the process's facade left alone)
        job.init(
            fleet.UserDefinedRoleMaker(
                current_id=index, worker_num=workers, server_endpoints=["127.0.0.1:1"]
            )
        )
        shards.append(job.util.get_file_shard(files))
    assert shards == expected
    with pytest.raises(errors.InvalidArgument, match="list of file names"):
        job.util.get_file_shard("a,b")
    assert callable(fleet.util.get_file_shard)  # the facade's fleet.util has it too


def _python(tmp_path: pathlib.Path, body: str, **env: str):
    script = jobs.write(tmp_path / "script.py", body)
    return jobs.run_script(script, timeout=60, **env)


@pytest.mark.parametrize("collective", [False, True])
def test_init_without_a_launcher_is_a_one_worker_job_with_a_notice(tmp_path, collective):
    result = _python(
        tmp_path,
        f"""
        import fleet
        fleet.init(is_collective={collective})
        print(fleet.worker_num(), fleet.worker_index(), fleet.is_worker(), fleet.is_server(),
              fleet.is_first_worker())
        """,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", "0", "True", "False", "True"]
    notices = [line for line in result.stderr.splitlines() if "one-worker job" in line]
    assert len(notices) == 1, result.stderr


def test_a_ps_role_maker_without_its_environment_keeps_its_error(tmp_path):
    result = _python(
        tmp_path,
        """
        import fleet
        fleet.init(fleet.PaddleCloudRoleMaker())
        """,
    )
    assert result.returncode != 0
    assert "PaddleCloudRoleMaker" in result.stderr and "TRAINING_ROLE" in result.stderr


@pytest.mark.parametrize("variable", ["PADDLE_TRAINERS_NUM", "PADDLE_NUM_TRAINERS"])
def test_a_launch_asking_for_more_workers_than_it_has_is_an_error(tmp_path, variable):
    result = _python(
        tmp_path,
        """
        import fleet
        fleet.init(is_collective=True)
        print("ran as", fleet.worker_num())
        """,
        **{variable: "2"},
    )
    assert result.returncode != 0, result.stdout
    assert "ran as" not in result.stdout
    assert variable in result.stderr and "2" in result.stderr


def test_the_2x_parameter_server_script_runs_without_a_launcher(tmp_path):
    """The same script a PS job runs, started with plain python: a one-worker local job whose
    first (only) worker saves and exports."""
    folder = tmp_path / "job"
    folder.mkdir()
    script = folder / "train.py"
    shutil.copy(pathlib.Path(__file__).parent / "scripts" / "ps_idioms.py", script)
    result = jobs.run_script(script, "async", "order", str(folder), timeout=60)
    assert result.returncode == 0, result.stderr
    assert jobs.results(folder, "done") == {"0": {"steps": 8}}
    program, feeds, fetches = fleet.io.load_inference_model(
        str(folder / "export"), fleet.Executor()
    )
    assert feeds == ["ids", "x"] and len(fetches) == 1


def _ps_worker_programs(strategy):
    """The plan of a PS worker's programs rewritten for `strategy` (no servers needed to
    rewrite), by a Fleet object of its own: the process's facade keeps no PS job."""
    job = Fleet()
    job.init(
        fleet.UserDefinedRoleMaker(current_id=0, worker_num=1, server_endpoints=["127.0.0.1:1"])
    )
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        x = fleet.layers.data("x", [64])
        hidden = fleet.layers.fc(x, 32, act="relu")
        loss = fleet.layers.mean(fleet.layers.fc(hidden, 1))
        job.distributed_optimizer(fleet.optimizer.SGD(0.1), strategy).minimize(loss)
    return job.ps_plan


def test_program_config_sets_the_dense_table_blocks():
    strategy = fleet.DistributedStrategyFactory.create_async_strategy()
    strategy.set_program_config({"min_block_size": 1024})
    assert _ps_worker_programs(strategy).dense_config.dense_block_size == 1024
    whole = fleet.DistributedStrategyFactory.create_async_strategy()
    whole.set_program_config({"slice_var_up": False})
    plan = _ps_worker_programs(whole)
    assert plan.dense_config.dense_block_size == plan.dense_config.dim  # one block


def test_gradient_merge_in_a_parameter_server_job_is_refused_clearly():
    strategy = fleet.DistributedStrategy()
    strategy.gradient_merge = True
    strategy.gradient_merge_configs = {"k_steps": 4}
    with pytest.raises(errors.InvalidArgument, match="gradient_merge.*max_merge_var_num"):
        _ps_worker_programs(strategy)
