"""Starting, watching and stopping the processes of a job.

Each process runs in its own session (so its own process group): Ctrl-C at the terminal reaches
only fleetrun, which then stops the job, and stopping a process signals its whole group, so
whatever the script itself started goes too. If fleetrun itself is killed without a chance to
clean up (SIGKILL), PR_SET_PDEATHSIG makes the kernel kill each process it started, and the
watchdog (watchdog.py, a process of its own that fleetrun tells every group) takes down the
groups, so what the scripts started (grandchildren) goes as well.

A group is signalled by its number, the pid of the process that leads it. Once that process is
reaped and its group is empty, the kernel may give the number to any new process, and a signal
to the "group" reaches that stranger: on a busy machine (pids wrap around within minutes) the
end of one job can stop another job's parameter server this way, which then exits 0 as if its
own job had told it to. So a process that exits is not reaped until the job is stopped
(Proc.exit_code waits with WNOWAIT): while it is a zombie its pid, and so its group's number, is
nobody else's. Proc.reap comes after the last signal.

Lifecycle (see JobController.run): a process that exits non-zero stops the job and fleetrun exits
non-zero after printing the tail of that process's output; once every worker has exited 0 the
servers are stopped and fleetrun exits 0 (on a machine running servers only, once they have all
exited 0, or with an error naming them when the job's workers on other machines are gone or never
came up: see host_watch.py); SIGTERM/SIGINT to fleetrun stop the job.
"""

from __future__ import annotations

import collections
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from typing import IO, Optional

from fleet import role_maker as rm
from fleet._crash_report import NATIVE_BACKTRACE
from fleet._endpoints import format_endpoint
from fleet.launch.host_watch import WorkerBeacon, WorkerHostWatch, beacon_answer, describe_workers
from fleet.launch.plan import JobPlan, ProcSpec
from fleet.launch.watchdog import start_time

_POLL_S = 0.05
# How long a failure waits for other processes already on their way out before the job is
# stopped: one failure often takes others with it (a rendezvous store's host exits and its
# clients' connections drop), and the exit a poll sees first need not be the first cause.
_FAILURE_SETTLE_S = 0.5
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Runs in the child between fork and exec: ask for SIGKILL when fleetrun dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _how(code: int) -> str:
    """How a process ended, for fleetrun's report: "exited with 3", "was killed by SIGKILL"."""
    return f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with {code}"


class Proc:
    """A started process, where its output goes, and the last lines of that output. Its exit is
    read without reaping it (exit_code) until reap(), so that its pid, the number of its group,
    stays its own while fleetrun may still signal the group (see the module doc)."""

    def __init__(
        self, spec: ProcSpec, popen: subprocess.Popen, log_path: Optional[str], tail_lines: int
    ) -> None:
        self.spec = spec
        self.popen = popen
        self.log_path = log_path
        self.tail: collections.deque[str] = collections.deque(maxlen=max(tail_lines, 1))
        self.reader: Optional[threading.Thread] = None
        self._exit_code: Optional[int] = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def exit_code(self) -> Optional[int]:
        """The exit code (negative: killed by that signal) once the process has ended, else
        None; the process stays a zombie, its pid reserved, until reap()."""
        if self._exit_code is None and self.popen.returncode is None:
            try:
                info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:  # reaped already
                info = None
            if info is not None:
                code = info.si_status
                self._exit_code = code if info.si_code == os.CLD_EXITED else -code
        if self._exit_code is None and self.popen.returncode is not None:
            self._exit_code = self.popen.returncode
        return self._exit_code

    def reap(self) -> None:
        """Collects the ended process; from here on its pid may belong to another process, so
        its group must not be signalled any more."""
        self.popen.wait()

    def tail_text(self, lines: int) -> str:
        if self.log_path is None:
            if self.reader is not None:
                self.reader.join(timeout=2.0)  # let the last lines of the pipe arrive
            return "".join(list(self.tail)[-lines:])
        with open(self.log_path, "r", errors="replace") as f:
            return "".join(collections.deque(f, maxlen=lines))

    def group_alive(self) -> bool:
        """Whether any process of this process's group (itself or what it started) lives; the
        zombie of an ended, unreaped process does not count."""
        if self.popen.returncode is not None:
            return False  # reaped: the number may be another's group now
        if self.exit_code() is None:
            return True
        return _group_has_live_members(self.pid)

    def signal_group(self, sig: int) -> None:
        """Signals the group while its number is still this process's (not reaped)."""
        if self.popen.returncode is not None:
            return
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _group_has_live_members(pgid: int) -> bool:
    """Whether a process other than a zombie is in group `pgid` (read from /proc: signal 0 to
    the group would count its zombie leader)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        # After the command: state, ppid, pgrp.
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


class JobController:
    """Runs one JobPlan on this machine; run() returns fleetrun's exit code."""

    def __init__(
        self,
        plan: JobPlan,
        log_dir: Optional[str],
        grace_period_s: float,
        tail_lines: int,
        out: IO[str] = sys.stdout,
        err: IO[str] = sys.stderr,
        host_timeout_s: float = 300.0,
    ) -> None:
        self.plan = plan
        self.host_timeout_s = host_timeout_s
        self.log_dir = log_dir
        self.grace_period_s = grace_period_s
        self.tail_lines = tail_lines
        self.out, self.err = out, err
        self.procs: list[Proc] = []
        self._out_lock = threading.Lock()
        self._signal: Optional[int] = None
        self._watchdog: Optional[subprocess.Popen] = None
        self._beacon: Optional[WorkerBeacon] = None
        self._host_watch: Optional[WorkerHostWatch] = None
        self._workers_answered = False
        # Why the job failed ("worker.1 exited with 3"), for fleetrun's restart log; None while
        # it has not, or when fleetrun itself was signalled (signalled is then True).
        self.failure: Optional[str] = None
        self.signalled = False

    def run(self) -> int:
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            self._start_watchdog()
            self._start_host_liveness()
            self._start_all()
            return self._watch()
        finally:
            self._stop(self.procs)
            self._stop_host_liveness()
            self._stop_watchdog()
            for proc in self.procs:
                if proc.reader is not None:
                    proc.reader.join(timeout=2.0)  # the last lines of each process's output
            for s, handler in previous.items():
                signal.signal(s, handler)

    def _start_watchdog(self) -> None:
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "watchdog.py")
        # Its own session: a signal to fleetrun's group (Ctrl-C, a scheduler) must leave it
        # running, since it acts only once fleetrun is gone.
        self._watchdog = subprocess.Popen(
            [sys.executable, "-I", script, str(self.grace_period_s)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            text=True,
        )

    def _start_host_liveness(self) -> None:
        """A PS job over several machines: a beacon on this machine's worker endpoints, or,
        on a machine of servers only, a watch of the workers' (see host_watch.py)."""
        if self.plan.mode != "ps" or not self.plan.procs:
            return
        env = self.plan.procs[0].env
        workers = [e for e in env.get(rm.TRAINER_ENDPOINTS, "").split(",") if e]
        servers = [e for e in env.get(rm.PSERVERS, "").split(",") if e]
        if not workers or len(self.plan.procs) == len(workers) + len(servers):
            return  # the whole job runs here: its processes' exits say everything
        # The identity as the processes see it: fleetrun's environment and what the plan adds.
        answer = beacon_answer(dict(os.environ, **env), servers, workers)
        local = [p for p in self.plan.procs if p.role == "worker"]
        if not local:
            self._host_watch = WorkerHostWatch(workers, answer, self.host_timeout_s)
            return
        endpoints = [
            format_endpoint(p.env[rm.POD_IP], int(p.env[rm.PADDLE_PORT]))
            for p in local
            if rm.POD_IP in p.env and rm.PADDLE_PORT in p.env
        ]
        if endpoints:
            self._beacon = WorkerBeacon(endpoints, answer)

    def _stop_host_liveness(self) -> None:
        if self._host_watch is not None:
            self._host_watch.close()
            self._host_watch = None
        if self._beacon is not None:
            self._beacon.close()
            self._beacon = None

    def _tell_watchdog(self, message: str) -> None:
        if self._watchdog is None:
            return
        try:
            self._watchdog.stdin.write(message + "\n")
            self._watchdog.stdin.flush()
        except (BrokenPipeError, OSError):
            self._say(
                "the watchdog exited; processes started by the scripts may outlive a "
                "SIGKILL of fleetrun"
            )
            self._watchdog = None

    def _stop_watchdog(self) -> None:
        """Every group is down: the watchdog may go without doing anything."""
        if self._watchdog is None:
            return
        self._tell_watchdog("done")
        if self._watchdog is not None:
            try:
                self._watchdog.stdin.close()
                self._watchdog.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self._watchdog.kill()
                self._watchdog.wait(timeout=5)
        self._watchdog = None

    def _on_signal(self, signum: int, frame: object) -> None:
        self._signal = signum

    def _start_all(self) -> None:
        if self.log_dir:
            os.makedirs(self.log_dir, exist_ok=True)
        # Every process is forked before any reader thread starts: forking with a pre-exec hook
        # while other threads run is what Python warns against.
        for spec in self.plan.procs:
            if self._signal is not None:
                return
            self.procs.append(self._spawn(spec))
            # Its group id (its own session) and when it started, read while it is our unreaped
            # child, so that the watchdog can tell it from a later process given the same pid.
            pid = self.procs[-1].pid
            started = start_time(pid)
            self._tell_watchdog(f"{pid} {started}" if started else str(pid))
        if not self.log_dir:
            for proc in self.procs:
                proc.reader = threading.Thread(target=self._pump, args=(proc,), daemon=True)
                proc.reader.start()

    def _spawn(self, spec: ProcSpec) -> Proc:
        env = dict(os.environ, **spec.env, PYTHONUNBUFFERED="1")
        # A crash of a launched process prints its C++ stack too, unless fleetrun's own
        # environment says otherwise (fleet/_crash_report.py).
        env.setdefault(NATIVE_BACKTRACE, "1")
        log_path = os.path.join(self.log_dir, spec.log_name) if self.log_dir else None
        stdout = open(log_path, "w") if log_path else subprocess.PIPE
        try:
            popen = subprocess.Popen(
                self.plan.command,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        finally:
            if log_path:
                stdout.close()  # the child holds its own descriptor
        return Proc(spec, popen, log_path, self.tail_lines)

    def _pump(self, proc: Proc) -> None:
        """Copies a process's output to the console, each line prefixed with its role and rank."""
        prefix = f"[{proc.spec.name}] "
        for raw in proc.popen.stdout:
            line = raw.decode(errors="replace")
            if not line.endswith("\n"):
                line += "\n"
            proc.tail.append(line)
            with self._out_lock:
                self.out.write(prefix + line)
                self.out.flush()
        proc.popen.stdout.close()

    def _watch(self) -> int:
        workers = [p for p in self.procs if p.spec.role == "worker"]
        while True:
            if self._signal is not None:
                name = signal.Signals(self._signal).name
                self.signalled = True
                self._say(f"received {name}; stopping {len(self.procs)} processes")
                return 128 + self._signal
            for proc in self.procs:
                code = proc.exit_code()
                if code is not None and code != 0:
                    return self._fail(proc, code)
            if workers and all(p.exit_code() == 0 for p in workers):
                servers = [p for p in self.procs if p.spec.role == "server"]
                if servers:
                    self._say(
                        f"all {len(workers)} workers finished; stopping {len(servers)} servers"
                    )
                return 0
            # A machine with servers only cannot see the workers finish elsewhere: its job ends
            # when its servers exit (told to stop by the workers) or when fleetrun is signalled.
            if not workers and all(p.exit_code() == 0 for p in self.procs):
                return self._servers_stopped()
            why = self._host_watch.failure() if self._host_watch is not None else None
            if why is not None:
                return self._fail_for_workers(why)
            self._say_once_workers_answer()
            time.sleep(_POLL_S)

    def _servers_stopped(self) -> int:
        """Every process of a machine of servers only exited 0: says so (a server exits 0 only
        when stopped, by a Stop RPC or a signal, which its own output names), and whether the
        job's workers had been seen, since servers stopped before any worker answered were not
        stopped by their own job's end. No process at all is an error, not a finished job."""
        if not self.procs:
            self._say("this machine had no process of the job to run")
            return 2
        names = ", ".join(p.spec.name for p in self.procs)
        seen = ""
        if self._host_watch is not None and not self._host_watch.answered():
            seen = (
                "; no worker of the job had answered yet (the servers' output says what "
                "stopped them)"
            )
        self._say(f"{names} exited 0 (told to stop){seen}; this machine's share of the job is done")
        return 0

    def _say_once_workers_answer(self) -> None:
        """On a machine of servers only: say once that the job's workers elsewhere answer,
        from when on their loss ends the job here within seconds (see host_watch.py)."""
        if self._host_watch is None or self._workers_answered or not self._host_watch.answered():
            return
        self._workers_answered = True
        workers = [e for e in self.plan.procs[0].env.get(rm.TRAINER_ENDPOINTS, "").split(",") if e]
        self._say(
            f"the job's workers answer: {describe_workers(workers, workers)}; the servers "
            "here stop when every worker is gone"
        )

    def _fail(self, failed: Proc, code: int) -> int:
        also = self._others_failing(failed)
        others = [p for p in self.procs if p is not failed and p.exit_code() is None]
        self.failure = f"{failed.spec.name} {_how(code)}"
        self._say(
            f"{failed.spec.name} (pid {failed.pid}) {_how(code)}; stopping the other "
            f"{len(others)} running processes"
        )
        for proc in also:
            self._say(f"{proc.spec.name} (pid {proc.pid}) also {_how(proc.exit_code())}")
        self._stop(self.procs)
        for proc in (failed, *also):
            where = f" (full log: {proc.log_path})" if proc.log_path else ""
            self._say(f"last {self.tail_lines} lines of {proc.spec.name}{where}:")
            with self._out_lock:
                text = proc.tail_text(self.tail_lines)
                self.err.write(
                    "".join(f"  {proc.spec.name} | {line}\n" for line in text.splitlines())
                )
                self.err.flush()
        return code if 0 < code < 256 else 1

    def _others_failing(self, failed: Proc) -> list[Proc]:
        """The other processes that fail on their own within _FAILURE_SETTLE_S of `failed`
        (before the job stops them), so that each one's cause is reported."""
        deadline = time.monotonic() + _FAILURE_SETTLE_S
        while True:
            running = [p for p in self.procs if p is not failed and p.exit_code() is None]
            if not running or time.monotonic() >= deadline:
                break
            time.sleep(_POLL_S)
        return [p for p in self.procs if p is not failed and p.exit_code() not in (None, 0)]

    def _fail_for_workers(self, why: str) -> int:
        """The job's workers on other machines are gone (or never came): stop the servers."""
        self.failure = why
        live = [p for p in self.procs if p.exit_code() is None]
        self._say(f"{why}; stopping the {len(live)} running processes here")
        self._stop(self.procs)
        return 1

    def _stop(self, procs: list[Proc]) -> None:
        """SIGTERM to every live process group, SIGKILL to those still alive after the grace
        period, then reap the processes (only then: see the module doc)."""
        live = [p for p in procs if p.group_alive()]
        for proc in live:
            proc.signal_group(signal.SIGTERM)
        deadline = time.monotonic() + self.grace_period_s
        while live and time.monotonic() < deadline:
            live = [p for p in live if p.group_alive()]
            if live:
                time.sleep(_POLL_S)
        for proc in live:
            self._say(
                f"{proc.spec.name} (pid {proc.pid}) ignored SIGTERM for "
                f"{self.grace_period_s:g} s; sending SIGKILL"
            )
            proc.signal_group(signal.SIGKILL)
        # SIGKILL is asynchronous: give the kernel a moment to take the groups down, bounded
        # because orphaned zombies stay in their group until whatever reaps orphans gets to them.
        deadline = time.monotonic() + 1.0
        while any(p.group_alive() for p in live) and time.monotonic() < deadline:
            time.sleep(0.01)
        for proc in procs:
            proc.reap()

    def _say(self, message: str) -> None:
        with self._out_lock:
            self.err.write(f"fleetrun: {message}\n")
            self.err.flush()
