"""benchmarks/cpu_window.py: runs a job of real processes, finds each process's busiest thread
as a trainer, and reports the CPU of every process inside the trainers' window, per sample when
told the rows, and how often the trainers blocked. The job here: two child processes that each
burn a fixed amount of CPU time (spinning, or pausing a fixed number of times on the way), and a
parent that sleeps."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.python.conftest import REPO_ROOT

TOOL = REPO_ROOT / "benchmarks" / "cpu_window.py"
# Each child spins until it has used BURN_S CPU seconds (CPU time, not wall time: the figure
# does not depend on the machine's load).
BURN_S = 1.5
CHILD = f"import time\nwhile time.process_time() < {BURN_S}:\n    sum(range(1000))\n"
# The same burn with PAUSES short sleeps (each a voluntary context switch), evenly spread over
# its CPU time, so the count that falls in the window does not depend on the load either.
PAUSES = 200
PAUSING_CHILD = (
    "import time\n"
    "paused = 0\n"
    f"while time.process_time() < {BURN_S}:\n"
    "    sum(range(1000))\n"
    f"    if paused < {PAUSES} and time.process_time() >= (paused + 0.5) * {BURN_S / PAUSES}:\n"
    "        paused += 1\n"
    "        time.sleep(0.0005)\n"
)

# The burn on a second thread that names itself (prctl PR_SET_NAME) while the main thread waits.
NAMED_CHILD = (
    "import ctypes, threading, time\n"
    "def burn():\n"
    "    ctypes.CDLL(None).prctl(15, b'spinner', 0, 0, 0)\n"
    f"    while time.thread_time() < {BURN_S}:\n"
    "        sum(range(1000))\n"
    "spinner = threading.Thread(target=burn)\n"
    "spinner.start()\n"
    "spinner.join()\n"
)


# The burn on the main thread, while a second thread starts SHORT_THREADS threads one after the
# other, each burning SHORT_BURN_S of its own CPU and ending: most end between two of the tool's
# samples (0.1 s apart), so their CPU is in no sampled thread's.
SHORT_THREADS, SHORT_BURN_S = 40, 0.02
SHORT_LIVED_CHILD = (
    "import threading, time\n"
    "def short():\n"
    f"    while time.thread_time() < {SHORT_BURN_S}:\n"
    "        sum(range(1000))\n"
    "def spawn():\n"
    f"    for _ in range({SHORT_THREADS}):\n"
    "        t = threading.Thread(target=short)\n"
    "        t.start()\n"
    "        t.join()\n"
    "spawner = threading.Thread(target=spawn)\n"
    "spawner.start()\n"
    f"while time.thread_time() < {BURN_S}:\n"
    "    sum(range(1000))\n"
    "spawner.join()\n"
)


def parent_of(child: str) -> str:
    return (
        "import subprocess, sys\n"
        f"children = [subprocess.Popen([sys.executable, '-c', {child!r}]) for _ in range(2)]\n"
        "sys.exit(max(c.wait() for c in children))\n"
    )


PARENT = parent_of(CHILD)
# A child's main thread is named after the interpreter it was started as (the kernel takes the
# file name it was exec'd by, at most 15 bytes): "python" or "python3", as pytest was started.
MAIN_THREAD_NAME = os.path.basename(sys.executable)[:15]


def run_tool(tmp_path, *args: str) -> dict:
    out = subprocess.run(
        [sys.executable, str(TOOL), "--log", str(tmp_path / "job.log"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_window_holds_the_trainers_cpu_and_counts_every_process(tmp_path):
    result = run_tool(
        tmp_path, "--samples", "1000", "--trainer_min_s", "1.0", "--", sys.executable, "-c", PARENT
    )
    # The two children are the trainers; the sleeping parent is not.
    assert result["trainer_threads"] == 2
    # Between 1% and 99% of the trainers' CPU: about 0.98 of what they burnt. The window's ends
    # snap to the tool's samples, 0.1 s apart, so each end may move by one sample of both
    # trainers spinning (0.2 CPU-s): on a quiet machine the window held as little as 2.66.
    one_sample = 0.1 * 2
    assert 0.98 * 2 * BURN_S - 2 * one_sample <= result["trainer_cpu_s"] <= 2 * BURN_S + 0.5
    assert result["job_cpu_s"] >= result["trainer_cpu_s"] - 0.05
    assert len(result["process_cpu_s"]) >= 2
    assert result["window_s"] > 0
    per_sample = result["job_cpu_s"] / (1000 * 0.98) * 1e6
    assert abs(result["job_us_per_sample"] - per_sample) <= 0.01 * per_sample + 0.01
    # Spinning trainers never block (being preempted by the load is not a wait).
    assert result["trainer_waits"] <= 10


def test_the_trainers_waits_in_the_window_are_counted(tmp_path):
    result = run_tool(
        tmp_path,
        "--samples",
        "1000",
        "--trainer_min_s",
        "1.0",
        "--",
        sys.executable,
        "-c",
        parent_of(PAUSING_CHILD),
    )
    assert result["trainer_threads"] == 2
    # About 98% of each child's pauses fall between 1% and 99% of its CPU time; the 0.1 s
    # sampling period may cut a few more at either end.
    assert 0.85 * 2 * PAUSES <= result["trainer_waits"] <= 2 * PAUSES + 10
    assert result["trainer_waits_per_ksample"] == round(
        result["trainer_waits"] / (1000 * 0.98) * 1e3, 3
    )


def test_each_threads_cpu_is_reported_under_its_name(tmp_path):
    result = run_tool(
        tmp_path, "--trainer_min_s", "1.0", "--", sys.executable, "-c", parent_of(NAMED_CHILD)
    )
    assert result["trainer_threads"] == 2
    children = {
        pid: by_name for pid, by_name in result["thread_cpu_s"].items() if "spinner" in by_name
    }
    assert len(children) == 2
    # The trainers are the named threads: the same window's CPU, found by name.
    assert (
        abs(sum(by_name["spinner"] for by_name in children.values()) - result["trainer_cpu_s"])
        <= 0.01
    )
    # The children's main threads only waited for them.
    for by_name in children.values():
        assert sum(cpu for name, cpu in by_name.items() if name != "spinner") < 0.2


def test_the_cpu_of_threads_that_ended_between_samples_is_reported(tmp_path):
    result = run_tool(
        tmp_path, "--trainer_min_s", "1.0", "--", sys.executable, "-c", parent_of(SHORT_LIVED_CHILD)
    )
    assert result["trainer_threads"] == 2
    # The children: each has a thread that burnt BURN_S (the parent, once it has reaped them,
    # counts their CPU as its own, in no thread of its own).
    children = [
        pid
        for pid, by_name in result["thread_cpu_s"].items()
        if by_name.get(MAIN_THREAD_NAME, 0.0) >= 0.98 * BURN_S - 0.2
    ]
    assert len(children) == 2
    for pid in children:
        by_name = result["thread_cpu_s"][pid]
        # A process's entries add up to its CPU (each entry is rounded to 0.001 s, and entries
        # under 0.005 s are left out).
        assert abs(sum(by_name.values()) - result["process_cpu_s"][pid]) <= 0.03
        # Most of the short threads' 0.8 CPU-s ended between samples, inside the window: the
        # trainer's 1.5 s runs beside them.
        assert by_name.get("(ended threads)", 0.0) >= 0.2


def test_a_failed_job_is_an_error_naming_its_log(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            str(TOOL),
            "--log",
            str(tmp_path / "job.log"),
            "--",
            sys.executable,
            "-c",
            "raise SystemExit(3)",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode != 0
    assert "exit 3" in out.stderr and "job.log" in out.stderr
