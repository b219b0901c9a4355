"""fleetrun signals only its own processes: it stops each process's group by its number (the pid
of the process that leads it), and a process that ended early keeps that number reserved until
the job is stopped, so no other process can have taken it. Before, fleetrun reaped an ended
worker at once, and when a new process of another job got its pid (pids wrap around within
minutes on a busy machine), the end of the job sent SIGTERM to that stranger: a parameter
server of another job then exits 0 as if its own job had stopped it.

The test hands the ended worker's pid to a bystander the only way a test can: it sets the
kernel's last pid (/proc/sys/kernel/ns_last_pid, root only) to the one before, and starts a
process of its own session, as fleetrun's processes are."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import time

import pytest

import fleet.launch
from fleet.launch.watchdog import start_time
from tests.python.e2e import launch_helpers as lh

pytestmark = pytest.mark.timeout(120)

NS_LAST_PID = "/proc/sys/kernel/ns_last_pid"

# Worker 0 ends at once; worker 1 (and so the job) lasts until the test releases it.
JOB = """
if fleet.is_server():
    serve_until_stopped()
if fleet.worker_index() == 0:
    record("ended", os.getpid())
    sys.exit(0)
while not (JOB_DIR / "release").exists():
    time.sleep(0.05)
"""


def _start_on_pid(pid: int) -> subprocess.Popen:
    """A bystander (its own session) started as the next process after pid - 1."""
    with open(NS_LAST_PID, "w") as f:
        f.write(str(pid - 1))
    return subprocess.Popen(["sleep", "300"], start_new_session=True)


def _skip_unless_pids_can_be_chosen() -> None:
    try:
        with open(NS_LAST_PID, "w") as f:
            f.write(open(NS_LAST_PID).read())
    except OSError as e:
        pytest.skip(f"cannot choose the next pid ({NS_LAST_PID}: {e.strerror})")


def test_the_pid_of_a_worker_that_ended_is_nobody_elses_until_the_job_stops(tmp_path):
    _skip_unless_pids_can_be_chosen()
    launcher = lh.start_job(tmp_path, ["--server_num=1", "--worker_num=2"], JOB)
    bystanders: list[subprocess.Popen] = []
    try:
        lh.wait_for_records(tmp_path, "ended", 1, [launcher])
        ended = lh.pids(tmp_path)["worker.0"]
        assert lh.running([ended], settle_s=30) == [], "worker 0 did not end"
        # A few tries, in case another process of the machine is started in between.
        bystanders = [_start_on_pid(ended) for _ in range(5)]
        assert ended not in [b.pid for b in bystanders], "the ended worker's pid was reused"
        (tmp_path / "release").write_text("")
        code, out, err = lh.finish(launcher)
        assert code == 0, err
        # The job's end signalled its own groups only.
        assert [b.poll() for b in bystanders] == [None] * len(bystanders), err
    finally:
        lh.stop_launcher(launcher)
        lh.kill_leftovers(tmp_path)
        for bystander in bystanders:
            bystander.kill()
            bystander.wait()


def test_the_watchdog_leaves_alone_a_process_that_took_an_ended_groups_number():
    """fleetrun killed: its watchdog signals the groups it was told of, but not a number that an
    ended group left and a new process of its own session took since."""
    _skip_unless_pids_can_be_chosen()
    script = pathlib.Path(fleet.launch.__file__).parent / "watchdog.py"
    watchdog = subprocess.Popen(
        [sys.executable, str(script), "2"],
        stdin=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    member = subprocess.Popen(["sleep", "300"], start_new_session=True)
    ended = subprocess.Popen(["sleep", "300"], start_new_session=True)
    bystanders: list[subprocess.Popen] = []
    try:
        for process in (member, ended):
            watchdog.stdin.write(f"{process.pid} {start_time(process.pid)}\n")
        watchdog.stdin.flush()
        # Start times count clock ticks (10 ms): a process started in the same tick as the one
        # whose number it takes cannot be told from it. Real reuse comes minutes later.
        time.sleep(0.05)
        ended.kill()
        ended.wait()  # reaped: its number is free
        bystanders = [_start_on_pid(ended.pid) for _ in range(5)]
        took_it = [b for b in bystanders if b.pid == ended.pid]
        if not took_it:
            pytest.skip("another process of the machine took the number first, every try")
        watchdog.stdin.close()  # as when fleetrun dies without saying "done"
        assert watchdog.wait(timeout=30) == 0
        assert member.wait(timeout=30) == -15, "the watchdog did not stop its own group"
        assert took_it[0].poll() is None, "the watchdog signalled the stranger on the number"
    finally:
        for process in (member, ended, *bystanders):
            process.kill()
            process.wait()
        watchdog.kill()
        watchdog.wait()
