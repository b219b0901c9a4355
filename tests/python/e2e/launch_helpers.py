"""Helpers for the fleetrun tests: run real jobs on 127.0.0.1 through `python -m fleet.launch`,
and the training scripts they run. Every process of a job records its pid and what it saw under
the job's directory, so tests check results and leftovers from the outside."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[3]

# Preamble of every test script: fleet.init() from fleetrun's environment, and a record of this
# process under $JOB_DIR/pids/<role>.<index>.
PREAMBLE = textwrap.dedent("""\
    import json, os, pathlib, signal, subprocess, sys, time
    import numpy as np
    from fleet import fleet_api as fleet
    fleet.init(is_collective=os.environ.get("TEST_COLLECTIVE") == "1")
    JOB_DIR = pathlib.Path(os.environ["JOB_DIR"])
    ME = (f"server.{fleet.server_index()}" if fleet.is_server()
          else f"worker.{fleet.worker_index()}")
    (JOB_DIR / "pids").mkdir(exist_ok=True)
    (JOB_DIR / "pids" / ME).write_text(str(os.getpid()))

    def record(name, value):
        # Written whole, then renamed: a test polling the records never reads half of one.
        part = JOB_DIR / f".{name}.{ME}.part"
        part.write_text(json.dumps(value))
        os.replace(part, JOB_DIR / f"{name}.{ME}.json")

    def serve_until_stopped():
        while True:
            time.sleep(0.2)

    def wait_for_records(name, count, timeout=30):
        # A job ends when its workers do: a worker that needs the servers' records waits for
        # them, or a server slow to start is stopped before it writes its own.
        deadline = time.monotonic() + timeout
        while len(list(JOB_DIR.glob(f"{name}.*.json"))) < count and time.monotonic() < deadline:
            time.sleep(0.05)
    """)


def write_script(job_dir: pathlib.Path, body: str) -> pathlib.Path:
    job_dir.mkdir(parents=True, exist_ok=True)
    path = job_dir / "train.py"
    path.write_text(PREAMBLE + textwrap.dedent(body))
    return path


def job_env(job_dir: pathlib.Path, collective: bool = False, **extra: str) -> dict[str, str]:
    env = dict(
        os.environ,
        PYTHONPATH=str(REPO_ROOT),
        JOB_DIR=str(job_dir),
        TEST_COLLECTIVE="1" if collective else "0",
        OPENBLAS_NUM_THREADS="1",
    )
    for name in (
        "FLEET_GLOO_STORE_PATH",
        "FLEET_GLOO_STORE_ENDPOINT",
        "FLEET_GLOO_TIMEOUT_S",
        "FLEET_GLOO_COLLECTIVE_TIMEOUT_S",
        "FLEET_JOB_ID",
    ):
        env.pop(name, None)
    env.update(extra)
    return env


def launcher_command(options: list[str], script: pathlib.Path, *script_args: str) -> list[str]:
    return [sys.executable, "-m", "fleet.launch", *options, str(script), *script_args]


def run_job(
    job_dir: pathlib.Path,
    options: list[str],
    body: str,
    timeout: float = 60,
    collective: bool = False,
    **env: str,
) -> subprocess.CompletedProcess:
    """Runs a job to completion; returns the launcher's result (text output)."""
    script = write_script(job_dir, body)
    return subprocess.run(
        launcher_command(options, script),
        env=job_env(job_dir, collective, **env),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_job(
    job_dir: pathlib.Path, options: list[str], body: str, collective: bool = False, **env: str
) -> subprocess.Popen:
    """Starts a job in the background; the caller must stop it (see stop_launcher)."""
    script = write_script(job_dir, body)
    return subprocess.Popen(
        launcher_command(options, script),
        env=job_env(job_dir, collective, **env),
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def stop_launcher(launcher: subprocess.Popen) -> None:
    """Last-resort clean-up of a launcher a test started (and of its whole session)."""
    if launcher.poll() is None:
        try:
            os.killpg(launcher.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    launcher.communicate(timeout=30)


def recorded(job_dir: pathlib.Path, name: str) -> dict[str, object]:
    """What each process recorded under `name`, keyed "worker.0", "server.1", ..."""
    prefix = f"{name}."
    return {
        p.name[len(prefix) : -len(".json")]: json.loads(p.read_text())
        for p in job_dir.glob(f"{name}.*.json")
    }


def pids(job_dir: pathlib.Path) -> dict[str, int]:
    pid_dir = job_dir / "pids"
    if not pid_dir.exists():
        return {}
    return {p.name: int(p.read_text()) for p in pid_dir.iterdir() if p.read_text()}


def wait_for_pids(job_dir: pathlib.Path, names: set[str], timeout: float = 30) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = pids(job_dir)
        if names <= set(found):
            return found
        time.sleep(0.05)
    raise AssertionError(
        f"processes {sorted(names - set(pids(job_dir)))} did not start within {timeout} s"
    )


def is_running(pid: int) -> bool:
    """True while `pid` is a live process (a zombie awaiting its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def wait_until_stopped(pid: int, timeout: float = 10.0) -> None:
    """Waits until every thread of `pid` is stopped (after a SIGSTOP the test sent). SIGSTOP
    takes effect only once the thread it was handed to gets a CPU; meanwhile the process's other
    threads (gRPC's among them) keep serving, long enough on a loaded machine to answer a small
    RPC. So a test that freezes a server waits for the kernel to report all its threads
    stopped before it counts from the freeze."""
    deadline = time.monotonic() + timeout
    states: list[str] = []
    while time.monotonic() < deadline:
        states = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/stat", encoding="ascii") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except FileNotFoundError:  # a thread that just ended
                pass
        if states and all(state in ("T", "t") for state in states):
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} not stopped {timeout} s after SIGSTOP: {states}")


def running(pid_list: list[int], settle_s: float = 2.0) -> list[int]:
    """The pids still running after up to `settle_s` (orphans get reaped asynchronously)."""
    deadline = time.monotonic() + settle_s
    alive = [p for p in pid_list if is_running(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if is_running(p)]
    return alive


def wait_for_records(
    job_dir: pathlib.Path, name: str, count: int, launchers, timeout: float = 90
) -> dict[str, object]:
    """Waits until `count` processes recorded `name` and returns the records (see recorded);
    fails at once, with its output, when one of `launchers` (the fleetruns of the job) ends
    first."""
    deadline = time.monotonic() + timeout
    while len(found := recorded(job_dir, name)) < count:
        for launcher in launchers:
            if launcher.poll() is not None:
                out, err = launcher.communicate()
                raise AssertionError(
                    f"a fleetrun ended ({launcher.returncode}) before {count} '{name}' records:"
                    f"\n{out[-2000:]}\n{err[-3000:]}"
                )
        assert time.monotonic() < deadline, f"{count} '{name}' records not there in {timeout} s"
        time.sleep(0.05)
    return found


def finish(launcher: subprocess.Popen, timeout: float = 120) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of a background fleetrun once it ends; stopped (and its
    session killed) when it does not end within `timeout`, or on any error."""
    try:
        out, err = launcher.communicate(timeout=timeout)
    finally:
        stop_launcher(launcher)
    return launcher.returncode, out, err


def kill_leftovers(*job_dirs: pathlib.Path) -> None:
    """SIGKILLs every recorded process of the jobs still running (a test's last clean-up)."""
    for job_dir in job_dirs:
        for pid in pids(job_dir).values():
            _kill_if_of_job(pid, job_dir)


def _kill_if_of_job(pid: int, job_dir: pathlib.Path) -> None:
    """SIGKILLs `pid` only if it is still a process of the job (JOB_DIR in its environment): the
    recorded pid of a process that ended may be another test's process by now (pids wrap
    around within minutes here). The pidfd is taken first, so the process checked is the one
    signalled."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:  # gone, or the pid is now a thread's
        return
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read().split(b"\0")
        if f"JOB_DIR={job_dir}".encode() in environ:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except OSError:  # it ended meanwhile
        pass
    finally:
        os.close(pidfd)
