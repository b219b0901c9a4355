"""python -m fleet.run_check on this machine (real fleetrun jobs on 127.0.0.1), and how it
reports a failing part."""

from __future__ import annotations

import io
import re
import subprocess
import sys

import pytest

from fleet import errors, run_check
from tests.python.conftest import REPO_ROOT

pytestmark = pytest.mark.timeout(300)


def test_run_check_passes_here_and_reports_build_and_times(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "fleet.run_check"],
        capture_output=True,
        text=True,
        timeout=280,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT)},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert out.startswith("Fleet 0.") and "CUDA compiled in:" in out and "GPUs visible:" in out
    assert re.search(r"BLAS: \S*blas\S*, \d+ thread", out), out
    for name in (
        "single-process training",
        "parameter-server training, async: 1 server, 2 workers",
        "parameter-server training, sync: 1 server, 2 workers",
        "collective all-reduce: 2 processes",
    ):
        assert re.search(rf"\[    ok\] {re.escape(name)} \(\d+\.\d\d s\): ", out), out
    assert out.strip().splitlines()[-1].startswith("Fleet works here")


def test_a_failing_part_says_what_failed_and_what_to_check():
    def refused() -> str:
        raise errors.Unavailable("cannot connect to 127.0.0.1:6170: Connection refused")

    def wrong() -> str:
        raise run_check.CheckFailed("the loss did not fall", "report it")

    out = io.StringIO()
    ok = run_check.run_check(out, [("fine", lambda: "all good"), ("ps", refused), ("train", wrong)])
    text = out.getvalue()
    assert not ok
    assert re.search(r"\[    ok\] fine \(\d+\.\d\d s\): all good", text)
    assert "[FAILED] ps" in text and "Unavailable: cannot connect" in text
    assert "check: processes could not reach each other" in text
    assert "[FAILED] train" in text and "check: report it" in text
    assert (
        text.strip().splitlines()[-1] == "Fleet does NOT work here: ps, train failed (see above)."
    )


@pytest.mark.parametrize(
    "output, hint",
    [
        ("ImportError: libgrpc.so.29: cannot open shared object file", "a library is missing"),
        ("RuntimeError: Address already in use", "a port could not be opened"),
        ("fleet.errors.Timeout: rendezvous timed out", "could not reach each other"),
    ],
)
def test_hints_name_the_likely_cause(output, hint):
    assert hint in run_check._hint_for(output)
