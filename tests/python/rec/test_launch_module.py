"""fleetrun --module NAME ARGS: every process runs `python -u -m NAME ARGS`."""

from __future__ import annotations

import sys

import pytest

from fleet.errors import InvalidArgument
from fleet.launch.args import parse_args
from fleet.launch.plan import build_plan


def test_a_module_runs_with_the_arguments_after_its_name():
    args = parse_args(
        [
            "--server_num=1",
            "--worker_num=2",
            "--module",
            "fleet.rec.static_ps_trainer",
            "-m",
            "config.yaml",
            "-o",
            "runner.epochs=1",
        ]
    )
    plan = build_plan(args, {}, pick_ports=lambda host, n: list(range(7000, 7000 + n)))
    assert plan.command == [
        sys.executable,
        "-u",
        "-m",
        "fleet.rec.static_ps_trainer",
        "-m",
        "config.yaml",
        "-o",
        "runner.epochs=1",
    ]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--collective", "--module"], "--module needs a module name"),
        (["--collective", "--module", "fleet.rec.nothing_here"], "no such module importable"),
    ],
)
def test_a_module_that_cannot_run_is_refused(argv, message):
    with pytest.raises(InvalidArgument, match=message):
        parse_args(argv)
