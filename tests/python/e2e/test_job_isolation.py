"""Two jobs given the same ports never mix (issue 29): a process of a second job is refused at its
first call to a parameter server or to the rendezvous store, with an error naming both jobs, and
the first job ends with exactly its own results.

The PS job trains the sync "w" model (w_model.py): after STEPS steps w is -LR * STEPS exactly, so
a push of another job's gradients would show as a different w.
"""

from __future__ import annotations

import socket
import subprocess
import time

import pytest

from fleet.launch.plan import free_ports
from tests.python.e2e import launch_helpers as lh

pytestmark = pytest.mark.timeout(180)

LR = 0.5
STEPS = 30
# How long the second job may take to fail: a Python start-up and one refused call, on a loaded
# machine (measured: 2-5 s).
FAIL_WITHIN_S = 45

PS_TRAIN = f"""
from tests.python.e2e.w_model import start
worker = start({LR})
record("started", os.environ.get("FLEET_JOB_ID", ""))
for step in range({STEPS}):
    if step == {STEPS} - 1:
        # The job (and its server) lasts until the test has run the second job, however long
        # a loaded machine takes to start it.
        deadline = time.monotonic() + 150
        while not (JOB_DIR / "release").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    worker.step()
    time.sleep(float(os.environ.get("STEP_PAUSE_S", "0")))
record("w", worker.w())
fleet.stop_worker()
"""


def _run_second(job_dir, options, body, collective=False, **env):
    started = time.monotonic()
    result = lh.run_job(job_dir, options, body, timeout=120, collective=collective, **env)
    took = time.monotonic() - started
    print(f"the second job ran {took:.1f} s")
    return result, took


def test_a_second_ps_job_on_the_same_ports_fails_and_the_first_keeps_its_own_results(tmp_path):
    server_port, worker_a, worker_b, store_a, store_b = free_ports("127.0.0.1", 5)
    servers = f"--servers=127.0.0.1:{server_port}"
    first = lh.start_job(
        tmp_path / "a",
        [servers, f"--workers=127.0.0.1:{worker_a}", f"--store_port={store_a}"],
        PS_TRAIN,
        STEP_PAUSE_S="0.3",
    )
    try:
        lh.wait_for_records(tmp_path / "a", "started", 1, [first])
        # The same command with the same server port: its server cannot listen, its worker
        # finds the first job's server.
        second, took = _run_second(
            tmp_path / "b",
            [servers, f"--workers=127.0.0.1:{worker_b}", f"--store_port={store_b}"],
            PS_TRAIN,
        )
        (tmp_path / "a" / "release").write_text("")
        code, out, err = lh.finish(first)
    finally:
        lh.stop_launcher(first)
        lh.kill_leftovers(tmp_path / "a", tmp_path / "b")
    assert second.returncode != 0, second.stderr
    assert took < FAIL_WITHIN_S, f"the second job took {took:.1f} s to fail"
    assert code == 0, err
    assert lh.recorded(tmp_path / "a", "w") == {"worker.0": -LR * STEPS}
    assert lh.recorded(tmp_path / "b", "w") == {}  # it never trained


def test_a_worker_of_another_job_is_refused_at_its_first_call_naming_both_jobs(tmp_path):
    server_port, worker_a, worker_b, store_a, store_b = free_ports("127.0.0.1", 5)
    first = lh.start_job(
        tmp_path / "a",
        [
            f"--servers=127.0.0.1:{server_port}",
            f"--workers=127.0.0.1:{worker_a}",
            f"--store_port={store_a}",
        ],
        PS_TRAIN,
        STEP_PAUSE_S="0.3",
    )
    try:
        lh.wait_for_records(tmp_path / "a", "started", 1, [first])
        first_job = lh.recorded(tmp_path / "a", "started")["worker.0"]
        # A job whose server would be on "another machine" (127.0.0.2): this fleetrun starts its
        # worker only, which reaches the first job's server at 127.0.0.1.
        second, took = _run_second(
            tmp_path / "b",
            [
                f"--servers=127.0.0.1:{server_port}",
                f"--workers=127.0.0.2:{worker_b}",
                f"--store_port={store_b}",
                "--host=127.0.0.2",
            ],
            PS_TRAIN,
            FLEET_JOB_ID="intruder",
        )
        (tmp_path / "a" / "release").write_text("")
        code, out, err = lh.finish(first)
    finally:
        lh.stop_launcher(first)
        lh.kill_leftovers(tmp_path / "a", tmp_path / "b")
    assert second.returncode != 0, second.stderr
    assert took < FAIL_WITHIN_S, f"the second job took {took:.1f} s to fail"
    assert f"job '{first_job}'" in second.stderr and "job 'intruder'" in second.stderr, (
        second.stderr
    )
    assert code == 0, err
    assert lh.recorded(tmp_path / "a", "w") == {"worker.0": -LR * STEPS}
    assert lh.recorded(tmp_path / "b", "started") == {}


COLLECTIVE = """
from fleet.errors import FleetError
r = fleet.worker_index()
if r == 1:
    # Rank 0 serves the store at once; rank 1 comes late, so the rendezvous is under way
    # while the second job starts.
    while not (JOB_DIR / "go").exists():
        time.sleep(0.05)
record("joining", os.environ.get("FLEET_JOB_ID", ""))
total = None
for _ in range(200):
    total = fleet.util.all_reduce(np.array([float(r + 1)]))
record("sum", total.tolist())
"""


def test_a_rank_of_another_collective_job_is_refused_by_the_store(tmp_path):
    store_port, started_port = free_ports("127.0.0.1", 2)
    first = lh.start_job(
        tmp_path / "a",
        ["--collective", "--nproc_per_node=2", f"--store_port={store_port}"],
        COLLECTIVE,
        collective=True,
    )
    try:
        lh.wait_for_records(tmp_path / "a", "joining", 1, [first])
        _wait_for_listener(store_port, first)
        first_job = lh.recorded(tmp_path / "a", "joining")["worker.0"]
        (tmp_path / "b").mkdir()
        (tmp_path / "b" / "go").write_text("")
        # Rank 1 of a two-machine job whose rank 0 would be this machine's 127.0.0.1: its
        # store endpoint is the first job's store, reached during that job's rendezvous.
        second, took = _run_second(
            tmp_path / "b",
            [
                "--ips=127.0.0.1,127.0.0.2",
                "--host=127.0.0.2",
                "--nproc_per_node=1",
                f"--started_port={started_port}",
                f"--store_port={store_port}",
            ],
            COLLECTIVE,
            collective=True,
            FLEET_JOB_ID="intruder",
        )
        (tmp_path / "a" / "go").write_text("")
        code, out, err = lh.finish(first)
    finally:
        lh.stop_launcher(first)
        lh.kill_leftovers(tmp_path / "a", tmp_path / "b")
    assert second.returncode != 0, second.stderr
    assert took < FAIL_WITHIN_S, f"the second job took {took:.1f} s to fail"
    assert f"serves job '{first_job}'" in second.stderr, second.stderr
    assert "job 'intruder'" in second.stderr, second.stderr
    assert code == 0, err
    assert lh.recorded(tmp_path / "a", "sum") == {"worker.0": [3.0], "worker.1": [3.0]}
    assert lh.recorded(tmp_path / "b", "sum") == {}


def _wait_for_listener(port, launcher, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if launcher.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"nothing listens on the store port {port}") from None
            time.sleep(0.05)


def test_fleetrun_gives_each_job_on_one_machine_an_identity_of_its_own(tmp_path):
    body = 'record("job", os.environ["FLEET_JOB_ID"])\n'
    results = [
        subprocess.run(
            lh.launcher_command(["--collective", "--nproc_per_node=1"], script),
            env=lh.job_env(job_dir, collective=True),
            cwd=lh.REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        for job_dir, script in (
            (tmp_path / name, lh.write_script(tmp_path / name, body)) for name in ("a", "b")
        )
    ]
    assert [r.returncode for r in results] == [0, 0], [r.stderr for r in results]
    ids = [lh.recorded(tmp_path / name, "job")["worker.0"] for name in ("a", "b")]
    assert ids[0] != ids[1] and all(i.startswith("fleetrun-") for i in ids)
