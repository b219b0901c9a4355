"""Running the examples as the e2e tests do: in a subprocess with the repository on the path and
one BLAS thread (the job's processes share the cores), a fleetrun job of an example's script on
Criteo-format files, and the `key=value` figures the examples print."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]


def env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1")


def value(output: str, key: str) -> float:
    """The last `key=<number>` in `output`; fails the test naming the key when there is none."""
    found = re.findall(rf"{key}=([0-9.]+)", output)
    assert found, f"no {key}= in:\n{output[-3000:]}"
    return float(found[-1])


def fleetrun(
    script: pathlib.Path, train, test, *args: str, servers: int = 1, timeout: float = 900
) -> str:
    """Runs `script` under fleetrun with `servers` servers and 2 workers on the files; asserts
    that the job succeeded and returns its output."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "fleet.launch",
            f"--server_num={servers}",
            "--worker_num=2",
            str(script),
            "--train",
            *train,
            "--test",
            test,
            "--print_period",
            "100000",
            *args,
        ],
        env=env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout + result.stderr
