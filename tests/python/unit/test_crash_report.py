"""The native crash report (csrc/core/crash_report.h, fleet/_crash_report.py): a process that
crashes in a C++ frame writes that frame's C++ stack, then Python's faulthandler writes the Python
stack, and the process still dies of the signal. Each case crashes a child process on purpose
through the test-only module tests/python/_crash_testing (tests/native/crash_testing_module.cc)."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys

import pytest

from fleet import _crash_report
from fleet.errors import InvalidArgument
from tests.python.e2e import launch_helpers as lh

REPO_ROOT = pathlib.Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.timeout(180)

CHILD = """
import fleet
from tests.python import _crash_testing

def crash_from_python_frame():
    _crash_testing.crash({kind!r})

crash_from_python_frame()
"""


def _crash_child(kind: str, switch: str | None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    env.pop("PYTHONFAULTHANDLER", None)  # the report must enable faulthandler by itself
    env.pop(_crash_report.NATIVE_BACKTRACE, None)
    if switch is not None:
        env[_crash_report.NATIVE_BACKTRACE] = switch
    return subprocess.run(
        [sys.executable, "-c", CHILD.format(kind=kind)],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _report_lines(stderr: str) -> list[str]:
    """The report's lines, from its head to its last line."""
    head = stderr.index("*** Fleet native crash report")
    end = stderr.index("*** end of the C++ stack", head)
    return stderr[head:end].splitlines()


@pytest.mark.parametrize(
    "kind, signo",
    [("segv", signal.SIGSEGV), ("fpe", signal.SIGFPE), ("ill", signal.SIGILL)],
)
def test_a_fault_in_a_cpp_frame_prints_the_cpp_stack_then_the_python_stack(kind, signo):
    result = _crash_child(kind, "1")
    assert result.returncode == -signo, result.stderr
    lines = _report_lines(result.stderr)
    assert signo.name in lines[0]
    # The first frame is the faulting function, named, with its object file.
    assert lines[2].strip().startswith("#0 ")
    assert "CrashInNativeFrame" in lines[2] and "_crash_testing" in lines[2]
    # Then Python's faulthandler, after the C++ stack, with the Python frame that called it.
    python = result.stderr[result.stderr.index("*** end of the C++ stack") :]
    assert "Fatal Python error" in python
    assert "in crash_from_python_frame" in python


def test_an_abort_names_the_frame_that_called_abort():
    result = _crash_child("abort", "1")
    assert result.returncode == -signal.SIGABRT, result.stderr
    lines = _report_lines(result.stderr)
    assert "SIGABRT" in lines[0]
    frames = [line for line in lines[2:] if line.strip().startswith("#")]
    called_abort = next(i for i, line in enumerate(frames) if " abort " in line)
    assert "CrashInNativeFrame" in frames[called_abort + 1]
    assert "in crash_from_python_frame" in result.stderr.split("*** end of the C++ stack")[1]


@pytest.mark.parametrize("switch", [None, "0"])
def test_without_the_switch_there_is_no_cpp_stack(switch):
    result = _crash_child("segv", switch)
    assert result.returncode == -signal.SIGSEGV
    assert "Fleet native crash report" not in result.stderr


def test_the_switch_takes_only_on_or_off_values():
    assert _crash_report.requested({_crash_report.NATIVE_BACKTRACE: " On "})
    assert not _crash_report.requested({})
    assert not _crash_report.requested({_crash_report.NATIVE_BACKTRACE: "0"})
    with pytest.raises(InvalidArgument, match="FLEET_NATIVE_BACKTRACE='2'"):
        _crash_report.requested({_crash_report.NATIVE_BACKTRACE: "2"})


def test_processes_that_fleetrun_launches_report_native_crashes(tmp_path, monkeypatch):
    # fleetrun's environment does not set the switch: fleetrun turns it on for its processes.
    monkeypatch.delenv(_crash_report.NATIVE_BACKTRACE, raising=False)
    body = """
    from tests.python import _crash_testing

    def crash_in_worker():
        _crash_testing.crash("segv")

    crash_in_worker()
    """
    result = lh.run_job(tmp_path, ["--collective", "--nproc_per_node=1"], body, collective=True)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "Fleet native crash report" in output, output
    assert "CrashInNativeFrame" in output
    assert "in crash_in_worker" in output.split("*** end of the C++ stack")[1]
