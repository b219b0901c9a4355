"""The libFuzzer targets of tests/fuzz (MultiSlot parser, TCP store frame handler, PS request
handlers, PS checkpoint readers), built with
ASan + UBSan into build/fuzz and run for a few seconds each from their committed seed corpora.
A longer run on demand: bash tests/fuzz/run_fuzz.sh 3600."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess

import pytest

REPO_ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)
SECONDS_PER_TARGET = int(os.environ.get("FLEET_FUZZ_SECONDS", "4"))


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(
    shutil.which("clang++") is None, reason="clang++ missing (scripts/setup_env.sh installs it)"
)
def test_fuzz_targets_run_clean_from_their_seeds():
    returncode, stdout, stderr = _run_fuzz_script(timeout_s=840)
    assert returncode == 0, stdout[-4000:] + stderr[-4000:]
    runs = dict(re.findall(r"fuzz (\w+): (\d+) executions", stdout))
    assert set(runs) == {
        "multislot_parser_fuzz",
        "tcp_store_frame_fuzz",
        "ps_service_fuzz",
        "ps_checkpoint_fuzz",
    }, stdout
    # The checkpoint target writes and reads a file per input: a few hundred a second.
    least = {"ps_checkpoint_fuzz": 200}
    for target, count in runs.items():
        assert int(count) > least.get(target, 1000), f"{target} ran only {count} inputs"


def _run_fuzz_script(timeout_s: float) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of run_fuzz.sh, run in a process group of its own that is
    killed whole if it outlives the call. subprocess.run's timeout killed only the shell: its ninja
    and compilers went on building into build/fuzz (found after a timeout under load 24), where
    the next run's build would write the same files."""
    proc = subprocess.Popen(
        ["bash", os.path.join(REPO_ROOT, "tests", "fuzz", "run_fuzz.sh"), str(SECONDS_PER_TARGET)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    finally:
        if proc.poll() is None:  # timed out (here or by pytest-timeout): end what it started
            # SIGTERM first: ninja runs each compiler in a process group of its own and ends
            # them only when it is asked to stop, not when it is killed.
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
    return proc.returncode, stdout, stderr
