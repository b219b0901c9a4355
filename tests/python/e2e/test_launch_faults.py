"""fleetrun under faults: SIGKILL of the launcher itself takes down the whole job tree (the
processes it started and what they started), and bad --gpus / --log_dir values are clear errors
before anything starts."""

from __future__ import annotations

import os
import signal

import pytest

from fleet import _core
from tests.python.e2e import launch_helpers as lh

pytestmark = pytest.mark.timeout(120)

WITH_GRANDCHILD = """
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
(JOB_DIR / "pids" / f"{ME}.child").write_text(str(child.pid))
serve_until_stopped()
"""


@pytest.mark.parametrize(
    "options",
    [
        ["--server_num=1", "--worker_num=2"],
        ["--collective", "--nproc_per_node=2", "--log_dir=logs"],
    ],
)
def test_sigkill_of_fleetrun_leaves_no_process_behind(tmp_path, options):
    options = [o.replace("logs", str(tmp_path / "logs")) for o in options]
    launcher = lh.start_job(
        tmp_path, options, WITH_GRANDCHILD, collective="--collective" in options
    )
    try:
        names = (
            {"server.0", "worker.0", "worker.1"}
            if "--server_num=1" in options
            else {"worker.0", "worker.1"}
        )
        found = lh.wait_for_pids(tmp_path, names | {n + ".child" for n in names})
        assert all(lh.is_running(p) for p in found.values())
        os.kill(launcher.pid, signal.SIGKILL)  # the launcher only: no clean-up code runs
        launcher.communicate(timeout=30)
        # The children go by PR_SET_PDEATHSIG, the grandchildren by the watchdog.
        assert lh.running(list(found.values()), settle_s=15) == []
    finally:
        lh.stop_launcher(launcher)
        for pid in lh.pids(tmp_path).values():  # last resort if the test failed
            if lh.is_running(pid):
                os.kill(pid, signal.SIGKILL)


def _watchdogs_of(job_dir) -> list[int]:
    """Watchdog processes whose environment names this test's job directory."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if b"watchdog.py" not in f.read():
                    continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                if f"JOB_DIR={job_dir}".encode() in f.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def test_normal_end_stops_the_watchdog_too(tmp_path):
    result = lh.run_job(
        tmp_path, ["--collective", "--nproc_per_node=1"], "record('ran', 1)\n", collective=True
    )
    assert result.returncode == 0, result.stderr
    assert lh.recorded(tmp_path, "ran") == {"worker.0": 1}
    assert [p for p in _watchdogs_of(tmp_path) if lh.is_running(p)] == []


@pytest.mark.skipif(_core.cuda_device_count() > 0, reason="this machine has a GPU")
def test_gpus_on_a_machine_without_gpus_is_a_clear_error(tmp_path):
    result = lh.run_job(tmp_path, ["--gpus=0,1"], "record('ran', True)\n")
    assert result.returncode == 2
    assert "fleetrun: error: --gpus=0,1 but this machine has no usable CUDA GPU" in result.stderr
    assert "Traceback" not in result.stderr
    assert lh.recorded(tmp_path, "ran") == {}


@pytest.mark.parametrize("kind", ["file", "below_a_file"])
def test_log_dir_that_cannot_be_a_directory_is_a_clear_error(tmp_path, kind):
    a_file = tmp_path / "not-a-dir"
    a_file.write_text("x")
    log_dir = a_file if kind == "file" else a_file / "logs"
    result = lh.run_job(
        tmp_path,
        ["--collective", "--nproc_per_node=1", f"--log_dir={log_dir}"],
        "record('ran', True)\n",
    )
    assert result.returncode == 2
    expected = "is a file, not a directory" if kind == "file" else "cannot create the directory"
    assert f"fleetrun: error: --log_dir='{log_dir}'" in result.stderr
    assert expected in result.stderr
    assert "Traceback" not in result.stderr
    assert lh.recorded(tmp_path, "ran") == {}
