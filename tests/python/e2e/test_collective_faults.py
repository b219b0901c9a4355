"""Collective user errors and faults across real worker processes started by fleetrun: ranks
that call different collectives, a rank that never calls (timeout from the environment), and a
rank that exits cleanly without calling. Each gives an error naming the rank at fault, well
before the default 30-minute timeout."""

from __future__ import annotations

import time

import pytest

from tests.python.e2e import launch_helpers as lh

pytestmark = pytest.mark.timeout(120)


def test_mismatched_shapes_fail_every_worker_naming_the_rank(tmp_path):
    body = """
    from fleet.errors import InvalidArgument
    fleet.util.barrier()
    r = fleet.worker_index()
    try:
        fleet.util.all_reduce(np.ones(4 + (r == 1), np.float64))
    except InvalidArgument as e:
        record("error", str(e))
    # The mismatch was caught before data moved: the group still works.
    record("after", fleet.util.all_reduce(np.array([r]), "max").tolist())
    """
    result = lh.run_job(tmp_path, ["--collective", "--nproc_per_node=3"], body, collective=True)
    assert result.returncode == 0, result.stderr
    errors = lh.recorded(tmp_path, "error")
    assert sorted(errors) == ["worker.0", "worker.1", "worker.2"]
    for message in errors.values():
        assert (
            "rank 0 calls all-reduce(float64 [4], sum) but rank 1 calls "
            "all-reduce(float64 [5], sum)" in message
        )
    assert set(map(tuple, lh.recorded(tmp_path, "after").values())) == {(2,)}


def test_modes_differ_is_an_error_not_a_wrong_result(tmp_path):
    body = """
    fleet.util.all_reduce(np.ones(3), "max" if fleet.worker_index() == 1 else "sum")
    """
    result = lh.run_job(tmp_path, ["--collective", "--nproc_per_node=2"], body, collective=True)
    assert result.returncode != 0
    assert "fleet.errors.InvalidArgument" in result.stderr
    assert "rank 1 calls all-reduce(float64 [3], max)" in result.stderr


def test_collective_timeout_from_the_environment_names_the_missing_rank(tmp_path):
    body = """
    fleet.util.barrier()
    if fleet.worker_index() == 2:
        time.sleep(60)  # never calls; fleetrun stops it once a peer fails
    fleet.util.all_reduce(np.ones(2))
    """
    started = time.monotonic()
    result = lh.run_job(
        tmp_path,
        ["--collective", "--nproc_per_node=3"],
        body,
        collective=True,
        FLEET_GLOO_COLLECTIVE_TIMEOUT_S="1.5",
    )
    assert result.returncode != 0
    assert time.monotonic() - started < 40
    assert "fleet.errors.Timeout" in result.stderr
    assert "rank(s) [2] did not arrive within 1.5 s" in result.stderr
    assert lh.running(list(lh.pids(tmp_path).values()), settle_s=0.5) == []


def test_per_call_timeout_overrides_the_group(tmp_path):
    body = """
    from fleet.errors import Timeout
    fleet.util.barrier()
    if fleet.worker_index() == 0:
        started = time.monotonic()
        try:
            fleet.util.barrier(timeout_s=0.5)
        except Timeout as e:
            record("timeout", [str(e), time.monotonic() - started])
    else:
        time.sleep(3)
    """
    result = lh.run_job(
        tmp_path,
        ["--collective", "--nproc_per_node=2"],
        body,
        collective=True,
        FLEET_GLOO_COLLECTIVE_TIMEOUT_S="600",
    )
    assert result.returncode == 0, result.stderr
    message, elapsed = lh.recorded(tmp_path, "timeout")["worker.0"]
    assert (
        "barrier() #2 in group 'worker' (rank 0 of 2): rank(s) [1] did not arrive within "
        "0.5 s" in message
    )
    assert elapsed < 5


def test_a_rank_that_exits_without_calling_is_named(tmp_path):
    body = """
    fleet.util.barrier()
    if fleet.worker_index() == 1:
        sys.exit(0)  # a clean exit, skipping the collective below
    fleet.util.all_reduce(np.ones(2))
    """
    result = lh.run_job(
        tmp_path,
        ["--collective", "--nproc_per_node=2"],
        body,
        collective=True,
        FLEET_GLOO_COLLECTIVE_TIMEOUT_S="60",
    )
    assert result.returncode != 0
    assert "fleet.errors.Unavailable" in result.stderr
    assert "the connection to rank 1 (" in result.stderr
    assert "closed before it called this collective" in result.stderr
