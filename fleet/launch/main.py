"""fleetrun's entry point (`fleetrun = "fleet.launch.main:main"`, also `python -m fleet.launch`)."""

from __future__ import annotations

import os
import sys
from typing import Optional, Sequence

from fleet.errors import InvalidArgument
from fleet.launch.args import check_devices, parse_args
from fleet.launch.controller import JobController
from fleet.launch.plan import build_plan


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs a job; returns the exit code (0 when every worker succeeded)."""
    try:
        args = parse_args(argv)
        check_devices(args)
        plan = build_plan(args, dict(os.environ))
    except InvalidArgument as e:
        print(f"fleetrun: error: {e}", file=sys.stderr)
        return 2
    if not plan.procs:
        print("fleetrun: error: this machine has no process to start", file=sys.stderr)
        return 2
    return JobController(plan, args.log_dir, args.grace_period, args.log_tail).run()


if __name__ == "__main__":
    sys.exit(main())
