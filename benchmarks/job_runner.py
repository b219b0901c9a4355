"""Running a benchmark's jobs (a launcher and everything it starts) so that nothing outlives a
measurement, and reading their logs back. Shared by the parameter-server benchmarks."""

from __future__ import annotations

import os
import signal
import subprocess
import time


def run_in_session(
    command: list[str], log_path: str, env: dict, cwd: str, timeout: float
) -> tuple[int, float]:
    """Runs `command` in its own session, output to `log_path`; kills the whole session on
    timeout and after the launcher exits. (exit code, 124 on timeout; seconds)."""
    start = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True
        )
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = 124
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    return rc, time.perf_counter() - start


def tail(path: str, chars: int = 600) -> str:
    """The last `chars` characters of the file at `path` ("" when it cannot be read)."""
    try:
        with open(path, errors="replace") as f:
            return f.read()[-chars:]
    except OSError:
        return ""


def paddle_ps_launch(
    python: str, workers: int, log_dir: str, script_args: list[str], servers: int = 1
) -> list[str]:
    """The command of a PaddlePaddle 2.x parameter-server job on this machine: `servers` servers
    and `workers` workers, each running `script_args` with the peer environment's `python`. Run
    it with PADDLE_WITH_GLOO=1 (without it Paddle's barrier_worker does nothing)."""
    return [
        python,
        "-m",
        "paddle.distributed.launch",
        f"--server_num={servers}",
        f"--worker_num={workers}",
        "--log_dir",
        log_dir,
        *script_args,
    ]
