"""fleetrun's watchdog: takes a job's process groups down when fleetrun dies without cleaning up.

PR_SET_PDEATHSIG kills each process fleetrun starts when fleetrun dies, but not what those
processes started (a data loader, a server the script spawned): the kernel sends the signal to
the direct child only, and the grandchildren are re-parented and live on. So fleetrun also
starts this small process, in a session of its own, and tells it the process group of each job
process (one group per process, see controller.py) on its stdin, one line each: the group's
decimal id and its leader's start time. When
fleetrun ends normally it writes "done" first and the watchdog exits quietly. When its stdin
ends without "done" (fleetrun was killed, even by SIGKILL), it sends SIGTERM to every group,
then SIGKILL to those still alive after the grace period. A process that moved itself into
another session or group is out of its reach.

A group is known by its number, the pid of the process that led it, and once every process of
a group has ended the kernel may give that number to a new process (pids wrap within minutes on
a busy host). fleetrun reads each leader's start time while the leader is its unreaped child
(so surely that process), and the watchdog never signals a number whose process started at
another time: that is a stranger.

Run as a script (python watchdog.py GRACE_SECONDS), not as part of the fleet package, so that it
starts in milliseconds and holds no state of the job but the group ids.
"""

from __future__ import annotations

import os
import signal
import sys
import time


def start_time(pid: int) -> str | None:
    """When process `pid` started (field 22 of /proc/<pid>/stat), or None when there is none."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _ours(pgid: int, started: str | None) -> bool:
    """False when the number `pgid` now belongs to a process other than the leader it was given
    for. A leader that is gone is fine: while its group has members the number stays reserved."""
    if started is None:  # fleetrun could not read it: the number is trusted, as before
        return True
    now = start_time(pgid)
    return now is None or now == started


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _signal(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def main(argv: list[str]) -> int:
    grace_s = float(argv[1]) if len(argv) > 1 else 5.0
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # fleetrun handles Ctrl-C for the job
    started: dict[int, str | None] = {}  # group -> its leader's start time
    for line in sys.stdin:
        word = line.strip()
        if word == "done":
            return 0
        fields = word.split()
        if fields and fields[0].isdigit():
            started[int(fields[0])] = fields[1] if len(fields) > 1 else None

    # fleetrun is gone without saying "done".
    def still_ours(groups):
        return [g for g in groups if _alive(g) and _ours(g, started[g])]

    live = still_ours(started)
    for g in live:
        _signal(g, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while live and time.monotonic() < deadline:
        time.sleep(0.05)
        live = still_ours(live)
    for g in live:
        _signal(g, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
