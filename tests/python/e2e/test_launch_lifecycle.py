"""fleetrun's lifecycle: a failing process, or a signal to the launcher, stops the whole job and
leaves no process behind (checked by pid, grandchildren included)."""

from __future__ import annotations

import signal
import textwrap
import time

import pytest

from tests.python.e2e import launch_helpers as lh

pytestmark = pytest.mark.timeout(120)

# Every process also starts a grandchild (a long sleep) and records its pid.
WITH_GRANDCHILD = """
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
(JOB_DIR / "pids" / f"{ME}.child").write_text(str(child.pid))
"""


def test_raising_worker_stops_the_job_with_its_traceback(tmp_path):
    body = WITH_GRANDCHILD + textwrap.dedent("""
        if ME == "worker.1":
            time.sleep(0.5)
            raise RuntimeError("worker one gives up")
        serve_until_stopped()
        """)
    # The other processes serve until stopped: the job ends (within run_job's timeout) only
    # because fleetrun stops them. No wall-clock bound: under load it says nothing more.
    result = lh.run_job(tmp_path, ["--server_num=1", "--worker_num=2"], body, timeout=60)
    assert result.returncode != 0
    assert "worker.1 (pid" in result.stderr and "exited with 1" in result.stderr
    assert "stopping the other 2 running processes" in result.stderr, result.stderr[-3000:]
    assert "worker.1 | Traceback (most recent call last):" in result.stderr
    assert "worker.1 | RuntimeError: worker one gives up" in result.stderr
    recorded = lh.pids(tmp_path)
    assert len(recorded) == 6  # 3 processes and their 3 grandchildren
    assert lh.running(list(recorded.values()), settle_s=0.5) == []


def test_failure_with_log_dir_prints_the_tail_of_the_log_file(tmp_path):
    body = """
    if fleet.is_worker():
        print("about to fail", flush=True)
        sys.exit(3)
    serve_until_stopped()
    """
    log_dir = tmp_path / "logs"
    result = lh.run_job(
        tmp_path, ["--server_num=1", "--worker_num=1", f"--log_dir={log_dir}"], body
    )
    assert result.returncode == 3
    assert f"full log: {log_dir / 'workerlog.0'}" in result.stderr
    assert "worker.0 | about to fail" in result.stderr
    assert lh.running(list(lh.pids(tmp_path).values()), settle_s=0.5) == []


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_to_the_launcher_leaves_nothing_behind(tmp_path, sig, code):
    body = WITH_GRANDCHILD + "serve_until_stopped()\n"
    launcher = lh.start_job(tmp_path, ["--server_num=2", "--worker_num=2"], body)
    try:
        names = {"server.0", "server.1", "worker.0", "worker.1"}
        found = lh.wait_for_pids(tmp_path, names | {n + ".child" for n in names})
        assert all(lh.is_running(p) for p in found.values())
        launcher.send_signal(sig)
        _, stderr = launcher.communicate(timeout=30)
        assert launcher.returncode == code
        assert f"received {signal.Signals(sig).name}; stopping 4 processes" in stderr
        assert lh.running(list(found.values()), settle_s=0.5) == []
    finally:
        lh.stop_launcher(launcher)


@pytest.mark.slow
def test_process_ignoring_sigterm_is_killed_after_the_grace_period(tmp_path):
    body = """
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    serve_until_stopped()
    """
    launcher = lh.start_job(
        tmp_path, ["--collective", "--nproc_per_node=2", "--grace_period=1"], body, collective=True
    )
    try:
        found = lh.wait_for_pids(tmp_path, {"worker.0", "worker.1"})
        started = time.monotonic()
        launcher.terminate()
        _, stderr = launcher.communicate(timeout=30)
        assert time.monotonic() - started < 5
        assert launcher.returncode == 143
        assert "ignored SIGTERM for 1 s; sending SIGKILL" in stderr
        assert lh.running(list(found.values()), settle_s=0.5) == []
    finally:
        lh.stop_launcher(launcher)
