"""Running ported Paddle scripts the way their users run them: as they are, in one process, or
through `fleetrun` (`python -m fleet.launch`) as a local job on 127.0.0.1. The scripts are the
Paddle ones with their imports changed and nothing else; each writes what the test checks as JSON
into $OUT_DIR."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

REPO_ROOT = pathlib.Path(__file__).resolve().parents[3]


def job_env(out_dir: pathlib.Path, **extra: str) -> dict[str, str]:
    """The environment of a user's shell: this interpreter first on PATH (so that a script's
    `python reader.py` pipe command finds Fleet), no launcher variables of an outer job."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PADDLE_", "FLEET_", "TRAINING_ROLE", "POD_IP"))
    }
    env.update(
        PYTHONPATH=str(REPO_ROOT),
        PATH=os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")]),
        OUT_DIR=str(out_dir),
        OPENBLAS_NUM_THREADS="1",
        PYTHONHASHSEED="0",
    )
    env.update(extra)
    return env


def write(path: pathlib.Path, text: str) -> pathlib.Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def run_script(
    script: pathlib.Path, *args: str, timeout: float = 120, **env: str
) -> subprocess.CompletedProcess:
    """Runs `python script args` in the script's folder (one process, no launcher)."""
    return subprocess.run(
        [sys.executable, str(script), *args],
        cwd=script.parent,
        env=job_env(script.parent, **env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def fleetrun(
    script: pathlib.Path,
    options: list[str],
    *args: str,
    timeout: float = 120,
    **env: str,
) -> subprocess.CompletedProcess:
    """Runs `fleetrun options script args` in the script's folder; logs of every process go to
    <folder>/logs (shown by `explain`)."""
    log_dir = script.parent / "logs"
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "fleet.launch",
            f"--log_dir={log_dir}",
            *options,
            str(script),
            *args,
        ],
        cwd=script.parent,
        env=job_env(script.parent, **env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def explain(result: subprocess.CompletedProcess, folder: pathlib.Path) -> str:
    """The launcher's output and every process log, for an assertion message."""
    parts = [f"rc={result.returncode}", result.stdout[-3000:], result.stderr[-3000:]]
    logs = folder / "logs"
    if logs.is_dir():
        for log in sorted(logs.iterdir()):
            parts.append(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}")
    return "\n".join(parts)


def results(folder: pathlib.Path, name: str) -> dict[str, object]:
    """What the script's processes wrote as <folder>/<name>.<who>.json, keyed by <who>."""
    prefix = f"{name}."
    return {
        p.name[len(prefix) : -len(".json")]: json.loads(p.read_text())
        for p in folder.glob(f"{name}.*.json")
    }
