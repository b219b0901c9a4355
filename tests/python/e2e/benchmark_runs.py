"""Running a benchmark script as its tests do: in a subprocess from the repository root with the
repository on the path; the run must succeed, and its last line is the JSON result."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.python.conftest import REPO_ROOT


def run_benchmark(script: str, *args: str, timeout: float = 600) -> dict:
    """Runs benchmarks/`script` with `args`; asserts it succeeded (showing its output's tails)
    and returns the JSON object of its last line."""
    proc = subprocess.run(
        [sys.executable, str(REPO_ROOT / "benchmarks" / script), *args],
        cwd=REPO_ROOT,
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
