"""JobController on hand-made plans: layouts that one machine's command line cannot produce."""

from __future__ import annotations

import io
import sys

import pytest

from fleet.launch.controller import JobController
from fleet.launch.plan import JobPlan, ProcSpec

pytestmark = pytest.mark.timeout(60)


def run_plan(tmp_path, script: str, specs: list[ProcSpec]) -> tuple[int, str, str]:
    path = tmp_path / "proc.py"
    path.write_text(script)
    out, err = io.StringIO(), io.StringIO()
    plan = JobPlan("ps", [sys.executable, "-u", str(path)], specs)
    code = JobController(plan, None, grace_period_s=2, tail_lines=10, out=out, err=err).run()
    return code, out.getvalue(), err.getvalue()


def test_servers_only_machine_ends_when_its_servers_exit(tmp_path):
    script = "import os\nprint('server', os.environ['RANK'], 'done')\n"
    specs = [ProcSpec("server", r, {"RANK": str(r)}) for r in range(2)]
    code, out, err = run_plan(tmp_path, script, specs)
    assert code == 0, err
    assert "[server.0] server 0 done" in out and "[server.1] server 1 done" in out


def test_server_crash_fails_the_job_even_when_workers_succeed(tmp_path):
    script = (
        "import os, sys, time\n"
        "if os.environ['ROLE'] == 'server':\n"
        "    sys.exit('server lost its table')\n"
        "time.sleep(30)\n"
    )
    specs = [ProcSpec("server", 0, {"ROLE": "server"}), ProcSpec("worker", 0, {"ROLE": "worker"})]
    code, _, err = run_plan(tmp_path, script, specs)
    assert code == 1
    assert "server.0 (pid" in err and "server.0 | server lost its table" in err
