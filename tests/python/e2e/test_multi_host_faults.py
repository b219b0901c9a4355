"""Faults of jobs over several hosts (issue 30), each host a loopback address of its own with its
own fleetrun: the workers' host fails or never starts, a server host never starts, a collective
host never starts. Every started host ends with an error naming the host at fault, within the
configured timeouts, and no process of the job is left."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from tests.python.e2e import launch_helpers as lh
from tests.python.e2e import multi_host as mh
from tests.python.e2e.multi_host import SERVER_HOSTS, WORKER_HOST
from tests.python.e2e.test_multi_host import LR, PS_FOREVER

# One pytest worker runs the tests that put jobs on 127.0.0.2-4: a host watch counts any
# listener on a dead worker's port as that worker, so two such jobs at once can hold each other up.
pytestmark = [pytest.mark.timeout(240), pytest.mark.xdist_group("hosts_127_0_0_2_to_4")]


def _start(tmp_path, hosts, options, body, **env) -> dict:
    launchers = {}
    for host in hosts:
        launchers[host] = mh.start_host(tmp_path, host, options, body, **env)
    return launchers


def _ended(launchers: dict, hosts, timeout: float = 90) -> dict:
    """host -> (exit code, stderr, seconds from the call to the end) of each given host."""
    start = time.monotonic()
    ended = {}
    for host in hosts:
        try:
            out, err = launchers[host].communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(launchers[host].pid, signal.SIGKILL)
            _, err = launchers[host].communicate(timeout=30)
            raise AssertionError(f"host {host} did not end within {timeout} s:\n{err[-3000:]}")
        ended[host] = (launchers[host].returncode, err, time.monotonic() - start)
        print(f"host {host} ended {ended[host][2]:.1f} s after the wait began")  # for the report
    return ended


def _assert_nothing_left(tmp_path) -> None:
    assert lh.running(list(lh.pids(tmp_path).values())) == []


# Worker 1 exits with 3 once it has trained 5 steps and the test has created JOB_DIR/fail (see
# let_worker_1_fail).
PS_WORKER_FAILS = PS_FOREVER.replace(
    "    step += 1",
    "    step += 1\n"
    "    if step >= 5 and fleet.worker_index() == 1 and (JOB_DIR / 'fail').exists():\n"
    "        sys.exit(3)",
)


def let_worker_1_fail(tmp_path, launchers: dict) -> dict:
    """Lets PS_WORKER_FAILS's worker 1 exit once both workers trained and each server host said
    it saw them; returns host -> what each server host's fleetrun printed until then. (A workers'
    host whose share began and ended between two of the servers' probes, a second apart, is
    never seen, and reported only after --host_timeout: on a fast machine worker 1's 5 steps
    took less.)"""
    mh.wait_for_records(tmp_path, "up", 2, launchers)
    seen = {
        host: mh.read_stderr_until(launchers[host], "the job's workers answer")
        for host in SERVER_HOSTS
    }
    (tmp_path / "fail").touch()
    return seen


def test_the_server_hosts_end_when_the_workers_fail_on_another_host(tmp_path):
    """Worker 1 exits with 3 mid-training: its host's fleetrun ends its share of the job, and
    both servers' hosts end within seconds, naming the workers and their host."""
    options, servers, workers, _ = mh.ps_layout()
    launchers = {}
    try:
        launchers = _start(
            tmp_path, (*SERVER_HOSTS, WORKER_HOST), options, PS_WORKER_FAILS, FLEET_JOB_ID="w-fail"
        )
        seen = let_worker_1_fail(tmp_path, launchers)
        ended = _ended(launchers, (WORKER_HOST, *SERVER_HOSTS))
    finally:
        for launcher in launchers.values():
            lh.stop_launcher(launcher)
    # Worker 1's 3, or worker 0's 1 when it failed (told by the servers) before fleetrun saw 3.
    code, err, _ = ended[WORKER_HOST]
    assert code in (1, 3), err[-3000:]
    for host in SERVER_HOSTS:
        code, err, after_workers = ended[host]
        err = seen[host] + err
        assert code == 1, err[-3000:]
        assert f"worker 0 at {workers[0]}, worker 1 at {workers[1]} (host(s) {WORKER_HOST})" in err
        assert "every worker of the job is gone" in err, err[-3000:]
    _assert_nothing_left(tmp_path)


def test_the_server_hosts_end_when_the_workers_host_dies(tmp_path):
    """The workers' fleetrun and workers are SIGKILLed once the server hosts have seen them: both
    server hosts end within seconds, naming the workers' host. (A host whose share of the job
    began and ended between two probes is never seen, and is reported after --host_timeout: the
    test waits for each server host to say it saw the workers, as a real job's hosts would have
    long before.)"""
    options, servers, workers, _ = mh.ps_layout()
    launchers = {}
    seen = {}
    try:
        launchers = _start(
            tmp_path, (*SERVER_HOSTS, WORKER_HOST), options, PS_FOREVER, FLEET_JOB_ID="w-dies"
        )
        mh.wait_for_records(tmp_path, "up", 2, launchers)
        for host in SERVER_HOSTS:
            seen[host] = mh.read_stderr_until(launchers[host], "the job's workers answer")
        pids = lh.pids(tmp_path)
        os.kill(launchers[WORKER_HOST].pid, signal.SIGKILL)
        for name in ("worker.0", "worker.1"):
            os.kill(pids[name], signal.SIGKILL)
        ended = _ended(launchers, SERVER_HOSTS)
    finally:
        for launcher in launchers.values():
            lh.stop_launcher(launcher)
    for host in SERVER_HOSTS:
        code, err, _ = ended[host]
        err = seen[host] + err
        assert code == 1, err[-3000:]
        assert "every worker of the job is gone" in err and f"(host(s) {WORKER_HOST})" in err, err
    _assert_nothing_left(tmp_path)


def test_a_workers_host_that_never_starts_ends_the_server_hosts(tmp_path):
    options, servers, workers, _ = mh.ps_layout()
    launchers = {}
    try:
        launchers = _start(
            tmp_path, SERVER_HOSTS, [*options, "--host_timeout=5"], PS_FOREVER, FLEET_JOB_ID="w-no"
        )
        ended = _ended(launchers, SERVER_HOSTS)
    finally:
        for launcher in launchers.values():
            lh.stop_launcher(launcher)
    for host in SERVER_HOSTS:
        code, err, _ = ended[host]
        assert code == 1, err[-3000:]
        assert "no worker of the job came up within 5 s (--host_timeout)" in err, err[-3000:]
        assert f"worker 1 at {workers[1]} (host(s) {WORKER_HOST}) never answered" in err
    _assert_nothing_left(tmp_path)


PS_SHORT_CONNECT = PS_FOREVER.replace(f"start({LR})", f"start({LR}, worker_timeout_s=5)")


def test_a_server_host_that_never_starts_ends_the_other_hosts(tmp_path):
    """Server 1's host never starts: the workers fail to connect after their 5 s, naming it,
    and server 0's host ends once the workers are gone."""
    options, servers, workers, _ = mh.ps_layout()
    launchers = {}
    try:
        launchers = _start(
            tmp_path,
            (SERVER_HOSTS[0], WORKER_HOST),
            options,
            PS_SHORT_CONNECT,
            FLEET_JOB_ID="s-no",
        )
        ended = _ended(launchers, (WORKER_HOST, SERVER_HOSTS[0]))
    finally:
        for launcher in launchers.values():
            lh.stop_launcher(launcher)
    code, err, _ = ended[WORKER_HOST]
    assert code != 0 and servers[1] in err, err[-3000:]
    code, err, _ = ended[SERVER_HOSTS[0]]
    assert code == 1 and "every worker of the job is gone" in err, err[-3000:]
    _assert_nothing_left(tmp_path)


def test_a_collective_host_that_never_starts_ends_the_other_naming_it(tmp_path):
    """Host 127.0.0.3's fleetrun is never started: the ranks of 127.0.0.2 fail their rendezvous
    after the 5 s of FLEET_GLOO_TIMEOUT_S, naming the missing ranks and where they run."""
    hosts = ["127.0.0.2", "127.0.0.3"]
    started = mh.common_free_port(hosts, 3)
    logs = tmp_path / "logs"
    options = [
        f"--ips={','.join(hosts)}",
        "--nproc_per_node=2",
        f"--started_port={started}",
        f"--log_dir={logs}",
    ]
    launchers = {}
    try:
        launchers[hosts[0]] = mh.start_host(
            tmp_path,
            hosts[0],
            options,
            "fleet.util.barrier()\nrecord('joined', True)\n",
            collective=True,
            FLEET_JOB_ID="c-no",
            FLEET_GLOO_TIMEOUT_S="5",
        )
        code, err, _ = _ended(launchers, hosts[:1])[hosts[0]]
    finally:
        for launcher in launchers.values():
            lh.stop_launcher(launcher)
    assert code != 0
    # Read from each rank's log: fleetrun prints the output of the rank that exited first, and
    # rank 1 may exit first, seeing the store of rank 0 go (rank 0 timed out first, the same 5 s
    # after an earlier start).
    missing = f"2 at 127.0.0.3:{started}, 3 at 127.0.0.3:{started + 1}"
    for rank in (0, 1):
        log = (logs / f"workerlog.{rank}").read_text()
        assert (
            f"rank(s) [2, 3] of 4 did not join ({missing};" in log
            or "TCP store at 127.0.0.2" in log
        ), log[-3000:]
    assert f"rank(s) [2, 3] of 4 did not join ({missing};" in (logs / "workerlog.0").read_text()
    assert lh.recorded(tmp_path, "joined") == {}
    _assert_nothing_left(tmp_path)
