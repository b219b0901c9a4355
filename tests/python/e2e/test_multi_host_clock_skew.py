"""Hosts whose clocks disagree (issue 30).

What a skewed clock could break in Fleet, and why it does not: every wait is measured with a
local monotonic clock (time.monotonic, std::chrono::steady_clock, Gloo's timeouts) or is a
relative gRPC deadline (sent as a duration, grpc-timeout), and nothing compares timestamps across
hosts: a server's incarnation id carries its start time only to be unique, liveness is a
connection that drops or a port that refuses (never the age of a heartbeat), and progress lines
count local seconds.

Each test runs one host's fleetrun, and everything it starts, in a time namespace of its own
(`unshare --time`, Linux 5.6+, root) whose monotonic and boot-time clocks are 3 days ahead of the
other hosts': monotonic readings of two hosts are as unrelated as on machines booted at different
times, so a time sent from one host and compared on another would show. A host's wall clock
cannot be moved this way: libfaketime (Debian's faketime) moves it, but its 0.9.10 hooks break
Python 3.11's own waits (time.sleep fails with EINVAL when the monotonic clock is left alone,
threading waits hang when it is moved too), so no Fleet process runs under it; the wall clock is
used only where the audit above says, for names."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from tests.python.e2e import collective_cases as cc
from tests.python.e2e import launch_helpers as lh
from tests.python.e2e import multi_host as mh
from tests.python.e2e.multi_host import SERVER_HOSTS, WORKER_HOST
from tests.python.e2e.test_multi_host import LR, STEPS
from tests.python.e2e.test_multi_host_faults import (
    PS_WORKER_FAILS,
    _assert_nothing_left,
    _ended,
    let_worker_1_fail,
)

# One pytest worker runs the tests that put jobs on 127.0.0.2-4: a host watch counts any
# listener on a dead worker's port as that worker, so two such jobs at once can hold each other up.
pytestmark = [pytest.mark.timeout(240), pytest.mark.xdist_group("hosts_127_0_0_2_to_4")]

AHEAD_S = 3 * 86400
SKEW = ["unshare", "--time", "--fork", f"--monotonic={AHEAD_S}", f"--boottime={AHEAD_S}"]


def _time_namespaces_work() -> bool:
    try:
        probe = subprocess.run([*SKEW, "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


if not _time_namespaces_work():
    pytest.skip(
        "cannot make a time namespace (unshare --time needs root and Linux 5.6+)",
        allow_module_level=True,
    )


def start_host(
    job_dir, host: str, options: list[str], body: str, skewed: bool, collective=False, **env
):
    """mh.start_host, under a clock 3 days ahead when `skewed`."""
    script = lh.write_script(job_dir, body)
    command = lh.launcher_command([*options, f"--host={host}"], script)
    return subprocess.Popen(
        [*SKEW, *command] if skewed else command,
        env=lh.job_env(job_dir, collective, **env),
        cwd=lh.REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


# The sync "w" job (w_model.py); each process records its monotonic clock.
PS_TRAIN = f"""
from tests.python.e2e.w_model import start
if fleet.is_server():
    record("clock", time.monotonic())
worker = start({LR})
for step in range({STEPS}):
    worker.step()
fleet.barrier_worker()
record("w", worker.w())
record("clock", time.monotonic())
fleet.stop_worker()
"""


def test_a_ps_job_trains_with_a_server_host_days_ahead(tmp_path):
    """Server 0's host runs 3 days ahead of the others: the job trains as on one clock."""
    options, servers, workers, _ = mh.ps_layout()
    launchers = {}
    try:
        for host in (*SERVER_HOSTS, WORKER_HOST):
            launchers[host] = start_host(
                tmp_path, host, options, PS_TRAIN, host == SERVER_HOSTS[0], FLEET_JOB_ID="skew-ps"
            )
        results = mh.finish(launchers)
    finally:
        for launcher in launchers.values():
            lh.stop_launcher(launcher)
    for host, (code, out, err) in results.items():
        assert code == 0, f"host {host}: {err[-3000:]}"
    assert lh.recorded(tmp_path, "w") == {"worker.0": -LR * STEPS, "worker.1": -LR * STEPS}
    clocks = lh.recorded(tmp_path, "clock")
    # The skew took: server 0's monotonic clock read days ahead of the other processes'.
    assert clocks["server.0"] - clocks["server.1"] > AHEAD_S - 3600
    _assert_nothing_left(tmp_path)


def test_a_skewed_server_host_ends_naming_the_failed_workers_host(tmp_path):
    """Both server hosts 3 days ahead of the workers' host; worker 1 exits with 3: the server
    hosts end naming the workers' host, as with one clock."""
    options, servers, workers, _ = mh.ps_layout()
    launchers = {}
    try:
        for host in (*SERVER_HOSTS, WORKER_HOST):
            launchers[host] = start_host(
                tmp_path, host, options, PS_WORKER_FAILS, host != WORKER_HOST, FLEET_JOB_ID="skew-f"
            )
        seen = let_worker_1_fail(tmp_path, launchers)
        ended = _ended(launchers, (WORKER_HOST, *SERVER_HOSTS))
    finally:
        for launcher in launchers.values():
            lh.stop_launcher(launcher)
    assert ended[WORKER_HOST][0] in (1, 3), ended[WORKER_HOST][1][-3000:]
    for host in SERVER_HOSTS:
        code, err, _ = ended[host]
        err = seen[host] + err
        assert code == 1, err[-3000:]
        assert "every worker of the job is gone" in err and f"(host(s) {WORKER_HOST})" in err
    _assert_nothing_left(tmp_path)


COLLECTIVE_TRAIN = """
from tests.python.e2e import collective_cases as cc
cc.run_rank(cc.CASES["dense_sgd"], str(JOB_DIR))
fleet.util.barrier()
"""


def test_a_collective_job_trains_with_one_host_days_ahead(tmp_path):
    hosts = ["127.0.0.2", "127.0.0.3"]
    started = mh.common_free_port(hosts, 3)
    options = [f"--ips={','.join(hosts)}", "--nproc_per_node=2", f"--started_port={started}"]
    launchers = {}
    try:
        for host in hosts:
            launchers[host] = start_host(
                tmp_path,
                host,
                options,
                COLLECTIVE_TRAIN,
                host == hosts[1],
                collective=True,
                FLEET_JOB_ID="skew-collective",
            )
        results = mh.finish(launchers)
    finally:
        for launcher in launchers.values():
            lh.stop_launcher(launcher)
    for host, (code, out, err) in results.items():
        assert code == 0, f"host {host}: {err[-3000:]}"
    ranks = [json.loads((tmp_path / f"dense_sgd.{r}.json").read_text()) for r in range(4)]
    expected = cc.reference(cc.CASES["dense_sgd"], 4, ranks[0]["initial"])
    for rank in ranks:
        for name, value in expected.items():
            np.testing.assert_allclose(rank["final"][name], value, rtol=1e-4, atol=1e-5)
    _assert_nothing_left(tmp_path)
