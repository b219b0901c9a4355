"""A real child process that serves on 127.0.0.1 and prints its port as its first line: the tests
that poke a native listener from outside (the rendezvous store, the liveness listener) run it this
way and stop it by closing its stdin, so it ends however the test ends."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def serving_child(script: str) -> Iterator[tuple[subprocess.Popen, int]]:
    """Runs `script` in a child Python and yields (the process, the port it printed). The script
    must print its port, then serve until its stdin closes."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        port = int(proc.stdout.readline())
        yield proc, port
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
