"""CPU of every process of a training job within its training window, and the throughput
ceiling that CPU allows on this machine's cores.

    .venv/bin/python benchmarks/cpu_window.py [--cores N] [--log FILE] -- COMMAND ...

Runs COMMAND, samples the CPU time (user + sys) of each of its processes and their threads ten
times a second, and finds the training window: the trainer threads are the busiest thread of
each process that used more than --trainer_min_s CPU seconds, and the window runs from when
they had used 1% of their final CPU time to when they had used 99%. Start-up, evaluation and
the end of the job fall outside it, so the figure compares the data paths of two jobs on the
same rows (a whole-job figure, such as ps_train.py's cpu_s_per_sample, adds a fixed cost of
start-up and evaluation that is a larger part of a faster job).

The last line is one JSON object: window_s, the window's CPU seconds per process and in all
(job_cpu_s), the trainer threads' (trainer_cpu_s), cores_used (job_cpu_s / window_s), and
trainer_waits: how many times the trainer threads blocked in the window (their voluntary context
switches: a wait for a reply, a lock or the data feed; a thread that never waits has none, one
preempted by the load is not counted). With --samples N (the rows trained; 98% of them fall in
the window), job_us_per_sample, trainer_us_per_sample and trainer_waits_per_ksample (times the
batch size / 1000: waits per step, summed over the trainers). thread_cpu_s and thread_waits
break each process's CPU and waits down by thread name (a trainer thread has its process's name;
gRPC's and the GEO exchange thread have theirs), counting threads alive at the samples only; the
CPU of threads that ended after their last sample or lived between two (a gRPC server starts and
ends serving threads as its calls overlap) and of reaped children is each process's
"(ended threads)" entry, so that a process's entries add up to its CPU.
A job of W workers on C cores can train at most C / job_us_per_sample samples per microsecond,
and one process at most 1 / trainer_us_per_sample (its trainer thread has one core); their
quotient is the job's ceiling against one process, whatever the load.

The figures move far less with the machine's load than samples/s, but a loaded machine still
raises every CPU time a little (caches shared with other jobs).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

TICKS_PER_S = os.sysconf("SC_CLK_TCK")
SAMPLE_PERIOD_S = 0.1
WINDOW_START, WINDOW_END = 0.01, 0.99


def _stat_fields(path: str) -> list[str]:
    """The fields of a /proc stat file after the command name (which may hold spaces)."""
    return _stat_name_and_fields(path)[1]


def _stat_name_and_fields(path: str) -> tuple[str, list[str]]:
    """The command name of a /proc stat file (a thread's name for a task's) and the fields after
    it."""
    with open(path) as f:
        text = f.read()
    return text[text.find("(") + 1 : text.rfind(")")], text[text.rfind(")") + 2 :].split()


def _descendants(root: int) -> list[int]:
    children = defaultdict(list)
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                children[int(_stat_fields(f"/proc/{name}/stat")[1])].append(int(name))
            except (OSError, IndexError, ValueError):
                continue  # the process ended while we looked
    tree, i = [root], 0
    while i < len(tree):
        tree += children.get(tree[i], [])
        i += 1
    return tree


def _voluntary_switches(path: str) -> int:
    """The voluntary_ctxt_switches line of a /proc status file."""
    with open(path) as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    raise ValueError(f"no voluntary_ctxt_switches in {path}")


def _sample(
    pids: list[int], names: dict[tuple[int, int], str]
) -> tuple[dict[int, float], dict[tuple[int, int], float], dict[tuple[int, int], int]]:
    """CPU seconds per process (with its reaped children's) and per thread, and each thread's
    voluntary context switches; records each thread's name in `names`."""
    processes, threads, switches = {}, {}, {}
    for pid in pids:
        try:
            f = _stat_fields(f"/proc/{pid}/stat")
            processes[pid] = sum(int(x) for x in f[11:15]) / TICKS_PER_S
            for tid in os.listdir(f"/proc/{pid}/task"):
                name, t = _stat_name_and_fields(f"/proc/{pid}/task/{tid}/stat")
                threads[(pid, int(tid))] = (int(t[11]) + int(t[12])) / TICKS_PER_S
                switches[(pid, int(tid))] = _voluntary_switches(f"/proc/{pid}/task/{tid}/status")
                names[(pid, int(tid))] = name
        except (OSError, IndexError, ValueError):
            continue
    return processes, threads, switches


def _per_thread_name(
    first: dict, last: dict, names: dict[tuple[int, int], str], min_value: float
) -> dict[str, dict[str, float]]:
    """Per process, the window's growth of a per-thread figure summed over the threads of one
    name (gRPC and pool threads share theirs), the names whose sum is at least min_value."""
    grown: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for (pid, tid), value in last.items():
        grown[str(pid)][names.get((pid, tid), "?")] += value - first.get((pid, tid), 0)
    return {
        pid: {
            name: round(value, 3)
            for name, value in sorted(by_name.items(), key=lambda item: -item[1])
            if value >= min_value
        }
        for pid, by_name in sorted(grown.items())
    }


ENDED_THREADS = "(ended threads)"


def _add_ended_threads(
    by_name: dict[str, dict[str, float]],
    first: dict,
    last: dict,
    per_process: dict[str, float],
    min_value: float,
) -> None:
    """Adds to each process's entry of `by_name` the window's CPU that none of its sampled
    threads holds: threads that ended between samples, and reaped children."""
    sampled: dict[str, float] = defaultdict(float)
    for (pid, tid), cpu in last.items():
        sampled[str(pid)] += cpu - first.get((pid, tid), 0)
    for pid, cpu in per_process.items():
        ended = cpu - sampled.get(pid, 0.0)
        if ended >= min_value:
            by_name.setdefault(pid, {})[ENDED_THREADS] = round(ended, 3)


def measure(command: list[str], log_path: str, trainer_min_s: float) -> dict:
    """Runs `command` (its output into `log_path`) and returns the window's figures."""
    # (time, processes, threads, switches), each carrying forward what has ended
    snapshots = []
    processes: dict[int, float] = {}
    threads: dict[tuple[int, int], float] = {}
    switches: dict[tuple[int, int], int] = {}
    names: dict[tuple[int, int], str] = {}
    with open(log_path, "w") as log:
        job = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        while job.poll() is None:
            p, t, w = _sample(_descendants(job.pid), names)
            processes.update(p)
            threads.update(t)
            switches.update(w)
            snapshots.append((time.monotonic(), dict(processes), dict(threads), dict(switches)))
            time.sleep(SAMPLE_PERIOD_S)
    if job.returncode != 0 or not snapshots:
        raise SystemExit(f"the job failed (exit {job.returncode}); its output is in {log_path}")
    busiest: dict[int, tuple[float, int]] = {}
    for (pid, tid), cpu in snapshots[-1][2].items():
        busiest[pid] = max(busiest.get(pid, (0.0, 0)), (cpu, tid))
    trainers = [(pid, tid) for pid, (cpu, tid) in busiest.items() if cpu > trainer_min_s]
    if not trainers:
        raise SystemExit(f"no thread used more than {trainer_min_s} CPU seconds")

    def trainer_cpu(snapshot: tuple) -> float:
        return sum(snapshot[2].get(key, 0.0) for key in trainers)

    total = trainer_cpu(snapshots[-1])
    first = next(s for s in snapshots if trainer_cpu(s) >= WINDOW_START * total)
    last = next(s for s in snapshots if trainer_cpu(s) >= WINDOW_END * total)
    window = last[0] - first[0]
    per_process = {
        str(pid): round(cpu - first[1].get(pid, 0.0), 3) for pid, cpu in sorted(last[1].items())
    }
    job_cpu = sum(per_process.values())
    waits = sum(last[3].get(key, 0) - first[3].get(key, 0) for key in trainers)
    thread_cpu = _per_thread_name(first[2], last[2], names, 0.005)
    _add_ended_threads(thread_cpu, first[2], last[2], per_process, 0.005)
    return {
        "command": command,
        "window_s": round(window, 3),
        "job_cpu_s": round(job_cpu, 3),
        "trainer_cpu_s": round(trainer_cpu(last) - trainer_cpu(first), 3),
        "trainer_threads": len(trainers),
        "trainer_waits": waits,
        "cores_used": round(job_cpu / window, 3) if window > 0 else None,
        "process_cpu_s": {pid: cpu for pid, cpu in per_process.items() if cpu > 0.005},
        # where each process's CPU went (a trainer thread is named after its process), and how
        # often each kind of thread blocked
        "thread_cpu_s": thread_cpu,
        "thread_waits": _per_thread_name(first[3], last[3], names, 1),
        "loadavg_1min_after": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=int, help="rows the job trains (for per-sample figures)")
    parser.add_argument(
        "--log",
        default=os.path.join(tempfile.gettempdir(), "cpu_window.log"),
        help="the job's output (default: cpu_window.log in the system's temporary folder, not "
        "the folder it runs in, which is often the repository)",
    )
    parser.add_argument(
        "--trainer_min_s",
        type=float,
        default=2.0,
        help="a process's busiest thread is a trainer when it used more CPU seconds than this",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ...")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the job's command after --")
    result = measure(command, args.log, args.trainer_min_s)
    if args.samples:
        in_window = args.samples * (WINDOW_END - WINDOW_START)
        result["job_us_per_sample"] = round(result["job_cpu_s"] / in_window * 1e6, 2)
        result["trainer_us_per_sample"] = round(result["trainer_cpu_s"] / in_window * 1e6, 2)
        result["trainer_waits_per_ksample"] = round(result["trainer_waits"] / in_window * 1e3, 3)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    sys.exit(main())
