"""Running example and benchmark scripts from tests: a script is run with this interpreter in a
child process, must exit 0, and reports its figures as `key=value` lines."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any, Sequence


def run_script(args: Sequence[Any], timeout: float, cwd: str | os.PathLike) -> str:
    """stdout of `python *args` (run in `cwd`); AssertionError with both output tails when it
    exits non-zero."""
    proc = subprocess.run(
        [sys.executable, *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=cwd
    )
    assert proc.returncode == 0, (
        f"{args[0]} exited with {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    )
    return proc.stdout


def last_value(output: str, key: str) -> float:
    """The number on the last `key=<number>` line of `output`."""
    match = re.findall(rf"^{re.escape(key)}=([-+0-9.eE]+)$", output, re.MULTILINE)
    assert match, f"no '{key}=' line in output:\n{output[-1500:]}"
    return float(match[-1])


__all__ = ["last_value", "run_script"]
