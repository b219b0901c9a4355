"""fleetrun's watchdog: takes a job's process groups down when fleetrun dies without cleaning up.

PR_SET_PDEATHSIG kills each process fleetrun starts when fleetrun dies, but not what those
processes started (a data loader, a server the script spawned): the kernel sends the signal to
the direct child only, and the grandchildren are re-parented and live on. So fleetrun also
starts this small process, in a session of its own, and tells it the process group of each job
process (one group per process, see controller.py) on its stdin, one decimal id a line. When
fleetrun ends normally it writes "done" first and the watchdog exits quietly. When its stdin
ends without "done" (fleetrun was killed, even by SIGKILL), it sends SIGTERM to every group,
then SIGKILL to those still alive after the grace period. A process that moved itself into
another session or group is out of its reach.

Run as a script (python watchdog.py GRACE_SECONDS), not as part of the fleet package, so that it
starts in milliseconds and holds no state of the job but the group ids.
"""

from __future__ import annotations

import os
import signal
import sys
import time


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
    groups: list[int] = []
    for line in sys.stdin:
        word = line.strip()
        if word == "done":
            return 0
        if word.isdigit():
            groups.append(int(word))
    # fleetrun is gone without saying "done".
    live = [g for g in groups if _alive(g)]
    for g in live:
        _signal(g, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while live and time.monotonic() < deadline:
        time.sleep(0.05)
        live = [g for g in live if _alive(g)]
    for g in live:
        _signal(g, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
