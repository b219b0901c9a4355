"""fleet.util across worker processes of a collective (CPU, Gloo) job launched by fleetrun:
results over three workers, the file store, and rendezvous timeouts naming the missing rank."""

from __future__ import annotations

import pytest

from tests.python.e2e import launch_helpers as lh

pytestmark = pytest.mark.timeout(120)

UTIL = """
r, n = fleet.worker_index(), fleet.worker_num()
x = np.array([r, -r, 2.5 * r], dtype=np.float64)
record("util", dict(
    roles=[fleet.is_worker(), fleet.is_server(), fleet.is_first_worker(), fleet.server_num(),
           fleet.worker_endpoints()[r] == os.environ["PADDLE_CURRENT_ENDPOINT"]],
    sum=fleet.util.all_reduce(x).tolist(), max=fleet.util.all_reduce(x, "max").tolist(),
    min=fleet.util.all_reduce(x, "min").tolist(),
    ints=fleet.util.all_reduce(np.int64(2**40 + r)).tolist(),
    gather=fleet.util.all_gather(f"rank {r} of {n}"),
    matrix=[a.tolist() for a in fleet.util.all_gather(np.full((2, 2), r, np.int32))]))
fleet.barrier_worker()
"""


def check_three_workers(job_dir):
    seen = lh.recorded(job_dir, "util")
    assert sorted(seen) == ["worker.0", "worker.1", "worker.2"]
    for name, out in seen.items():
        assert out["roles"] == [True, False, name == "worker.0", 0, True]
        assert out["sum"] == [3.0, -3.0, 7.5]
        assert out["max"] == [2.0, 0.0, 5.0]
        assert out["min"] == [0.0, -2.0, 0.0]
        assert out["ints"] == 3 * 2**40 + 3
        assert out["gather"] == ["rank 0 of 3", "rank 1 of 3", "rank 2 of 3"]
        assert out["matrix"] == [[[r, r], [r, r]] for r in range(3)]


def test_util_across_three_workers_with_the_tcp_store(tmp_path):
    result = lh.run_job(tmp_path, ["--collective", "--nproc_per_node=3"], UTIL, collective=True)
    assert result.returncode == 0, result.stderr
    check_three_workers(tmp_path)


def test_util_across_three_workers_with_a_file_store(tmp_path):
    store = tmp_path / "store"
    result = lh.run_job(
        tmp_path,
        ["--collective", "--nproc_per_node=3"],
        UTIL,
        collective=True,
        FLEET_GLOO_STORE_PATH=str(store),
    )
    assert result.returncode == 0, result.stderr
    check_three_workers(tmp_path)
    assert any(store.iterdir())  # the rendezvous went through the directory


@pytest.mark.slow
@pytest.mark.parametrize("missing", [2, 0])
def test_missing_rank_at_rendezvous_times_out_naming_it(tmp_path, missing):
    body = f"""
    if fleet.worker_index() == {missing}:
        time.sleep(30)  # never joins; fleetrun stops it once a peer fails
    fleet.util.barrier()
    """
    result = lh.run_job(
        tmp_path,
        ["--collective", "--nproc_per_node=3"],
        body,
        collective=True,
        FLEET_GLOO_TIMEOUT_S="3",
    )
    assert result.returncode != 0
    assert "fleet.errors.Timeout" in result.stderr
    assert f"rank(s) [{missing}] of 3 did not join" in result.stderr
    assert lh.running(list(lh.pids(tmp_path).values()), settle_s=0.5) == []
