"""a_sync_configs: the knobs are validated; max_dense_staleness accepts -1 (no bound) and any
count of steps, rpc_timeout_s seconds in (0, 86400], server_restarts a bool, nothing else."""

from __future__ import annotations

import pytest

import fleet
from fleet.errors import InvalidArgument


def test_max_dense_staleness_defaults_to_a_step_start_that_includes_the_last_gradient():
    strategy = fleet.DistributedStrategyFactory.create_async_strategy()
    assert strategy.a_sync_configs["max_dense_staleness"] == 0


@pytest.mark.parametrize("value", [-1, 0, 3])
def test_max_dense_staleness_takes_minus_one_or_a_count(value):
    strategy = fleet.DistributedStrategy()
    strategy.a_sync_configs = {"max_dense_staleness": value}
    assert strategy.async_config.max_dense_staleness == value
    assert strategy.a_sync_configs["send_queue_size"] == 16  # the other keys are kept


@pytest.mark.parametrize("value", [-2, 1.5, True, "1"])
def test_a_bad_max_dense_staleness_names_the_key_and_the_bound(value):
    strategy = fleet.DistributedStrategy()
    with pytest.raises(InvalidArgument, match=r"max_dense_staleness.*integer >= -1"):
        strategy.a_sync_configs = {"max_dense_staleness": value}


def test_an_unknown_async_key_lists_the_valid_ones():
    strategy = fleet.DistributedStrategy()
    with pytest.raises(InvalidArgument, match="max_dense_staleness.*send_queue_size"):
        strategy.a_sync_configs = {"max_dense_stalenes": 0}


@pytest.mark.parametrize(
    "mode, expected", [("sync", "SYNC"), ("async", "ASYNC"), ("half_async", "HALF_ASYNC")]
)
def test_create_by_name_gives_the_mode_and_applies_async_keys_where_they_count(mode, expected):
    strategy = fleet.DistributedStrategyFactory.create(mode, send_queue_size=1)
    assert strategy.mode.name == expected
    applied = mode != "sync"
    assert (strategy.a_sync_configs["send_queue_size"] == 1) == applied


@pytest.mark.parametrize("mode", ["sync", "async", "half_async", "geo"])
def test_create_applies_the_keys_every_mode_reads_in_every_mode(mode):
    # A sync or GEO job launched with local_transport="off" once silently kept the default.
    strategy = fleet.DistributedStrategyFactory.create(
        mode,
        local_transport="off",
        rpc_timeout_s=7,
        server_restarts=True,
        worker_restarts=True,
        send_queue_size=1,
    )
    configs = strategy.a_sync_configs
    assert configs["local_transport"] == "off"
    assert configs["rpc_timeout_s"] == 7.0
    assert configs["server_restarts"] is True and configs["worker_restarts"] is True
    assert (configs["send_queue_size"] == 1) == (mode in ("async", "half_async"))


def test_create_still_checks_a_key_every_mode_reads_in_sync():
    with pytest.raises(InvalidArgument, match="local_transport"):
        fleet.DistributedStrategyFactory.create("sync", local_transport="pipe")


def test_create_geo_takes_the_update_frequency():
    strategy = fleet.DistributedStrategyFactory.create("geo", 25, send_queue_size=1)
    assert strategy.mode.name == "GEO" and strategy.a_sync_configs["k_steps"] == 25


def test_create_names_the_valid_modes_for_an_unknown_one():
    with pytest.raises(InvalidArgument, match="unknown mode 'asyn'; valid modes: sync, async"):
        fleet.DistributedStrategyFactory.create("asyn")
    with pytest.raises(InvalidArgument, match="update_frequency must be an integer >= 1"):
        fleet.DistributedStrategyFactory.create("geo", 0)


def test_rpc_timeout_s_defaults_to_30_and_takes_seconds_in_any_mode():
    strategy = fleet.DistributedStrategyFactory.create_sync_strategy()
    assert strategy.a_sync_configs["rpc_timeout_s"] == 30.0
    strategy.a_sync_configs = {"rpc_timeout_s": 5}
    assert strategy.async_config.rpc_timeout_s == 5.0
    assert strategy.mode.value == "sync"  # a timeout does not change the mode


@pytest.mark.parametrize("value", [0, -1, float("nan"), float("inf"), 86401, True, "10", None])
def test_a_bad_rpc_timeout_s_names_the_key_the_value_and_the_range(value):
    strategy = fleet.DistributedStrategy()
    with pytest.raises(InvalidArgument, match=r"rpc_timeout_s'\] must be a number of seconds in"):
        strategy.a_sync_configs = {"rpc_timeout_s": value}


@pytest.mark.parametrize(
    "key, default, bad",
    [
        ("prefetch_sparse", True, 0),
        ("server_restarts", False, 1),
        ("worker_restarts", False, "yes"),
    ],
)
def test_a_switch_has_its_default_and_takes_only_a_bool(key, default, bad):
    strategy = fleet.DistributedStrategy()
    assert strategy.a_sync_configs[key] is default
    strategy.a_sync_configs = {key: not default}
    assert getattr(strategy.async_config, key) is (not default)
    with pytest.raises(InvalidArgument, match=rf"{key}.*must be a bool"):
        strategy.a_sync_configs = {key: bad}


def test_local_transport_is_shared_memory_by_default_and_takes_a_name_or_a_bool():
    strategy = fleet.DistributedStrategy()
    assert strategy.a_sync_configs["local_transport"] == "shm"
    for value, stored in [
        ("off", "off"),
        ("shm", "shm"),
        ("unix", "unix"),
        (True, "unix"),
        (False, "off"),
    ]:
        strategy.a_sync_configs = {"local_transport": value}
        assert strategy.async_config.local_transport == stored
    for bad in ("on", 1, None):
        with pytest.raises(InvalidArgument, match=r"local_transport.*must be \"off\", \"shm\""):
            strategy.a_sync_configs = {"local_transport": bad}


def test_max_sparse_staleness_is_unbounded_by_default_and_takes_minus_one_or_a_count():
    strategy = fleet.DistributedStrategy()
    assert strategy.a_sync_configs["max_sparse_staleness"] == -1
    strategy.a_sync_configs = {"max_sparse_staleness": 0}
    assert strategy.async_config.max_sparse_staleness == 0
    with pytest.raises(InvalidArgument, match=r"max_sparse_staleness.*integer >= -1"):
        strategy.a_sync_configs = {"max_sparse_staleness": -2}
