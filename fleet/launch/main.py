"""fleetrun's entry point (`fleetrun = "fleet.launch.main:main"`, also `python -m fleet.launch`)."""

from __future__ import annotations

import os
import sys
from typing import Optional, Sequence

from fleet.errors import InvalidArgument, NotFound
from fleet.launch.args import check_devices, parse_args
from fleet.launch.controller import JobController
from fleet.launch.plan import build_plan, own_host
from fleet.launch.preflight import check_plan
from fleet.ps.checkpoint import read_manifest


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs a job; returns the exit code (0 when every worker succeeded)."""
    try:
        args = parse_args(argv)
        check_devices(args)
        plan = build_plan(args, dict(os.environ))
        check_plan(plan, own_host(args, dict(os.environ)))
    except InvalidArgument as e:
        print(f"fleetrun: error: {e}", file=sys.stderr)
        return 2
    if not plan.procs:
        print("fleetrun: error: this machine has no process to start", file=sys.stderr)
        return 2
    restarts = 0
    while True:
        controller = JobController(
            plan, args.log_dir, args.grace_period, args.log_tail, host_timeout_s=args.host_timeout
        )
        code = controller.run()
        if code == 0 or controller.signalled or restarts >= args.max_restarts:
            return code
        restarts += 1
        resume = _latest_checkpoint(args.checkpoint_dir)
        where = f"from checkpoint {resume[0]} (save {resume[1]})" if resume else "from the start"
        if args.checkpoint_dir and not resume:
            where += f" ({args.checkpoint_dir} holds no complete save)"
        print(
            f"fleetrun: restart {restarts} of {args.max_restarts} {where}; cause: "
            f"{controller.failure or f'exit code {code}'}",
            file=sys.stderr,
            flush=True,
        )
        # Read by the processes' role maker (fleet.restart_checkpoint()).
        os.environ["FLEET_RESTART_CHECKPOINT"] = resume[0] if resume else ""
        os.environ["FLEET_RESTART_COUNT"] = str(restarts)
        plan = build_plan(args, dict(os.environ))  # fresh free ports


def _latest_checkpoint(dirname: Optional[str]) -> Optional[tuple[str, str]]:
    """(dirname, last save id) when `dirname` holds a committed save (its manifest is written
    last, so a save cut short leaves the previous one), else None."""
    if not dirname:
        return None
    try:
        manifest = read_manifest(dirname)
    except (NotFound, InvalidArgument):
        return None
    return os.path.abspath(dirname), manifest.last_save_id


if __name__ == "__main__":
    sys.exit(main())
