"""benchmarks/rounds.py, the round loop of the benchmarks that compare Fleet with a peer: the
sides take turns going first, every run carries its round and the load average around it, and
the medians and the highest load pass over the runs that failed."""

from __future__ import annotations

import sys

from tests.python.conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
import rounds  # noqa: E402


def test_the_sides_take_turns_going_first():
    assert rounds.in_turn(0, ("fleet", "peer")) == ["fleet", "peer"]
    assert rounds.in_turn(1, ("fleet", "peer")) == ["peer", "fleet"]
    assert rounds.in_turn(2, ("a", "b", "c")) == ["a", "b", "c"]
    assert rounds.in_turn(3, ("a", "b", "c")) == ["c", "b", "a"]


def test_alternate_runs_each_side_once_a_round_in_turn_with_its_load():
    order = []

    def side(name: str):
        def run() -> dict:
            order.append(name)
            return {"value": float(len(order))}

        return run

    runs = rounds.alternate(3, {"fleet": side("fleet"), "peer": side("peer")})
    assert order == ["fleet", "peer", "peer", "fleet", "fleet", "peer"]
    assert [r["round"] for r in runs["fleet"]] == [0, 1, 2]
    assert [r["value"] for r in runs["fleet"]] == [1.0, 4.0, 5.0]
    assert [r["value"] for r in runs["peer"]] == [2.0, 3.0, 6.0]
    for run in runs["fleet"] + runs["peer"]:
        assert run["loadavg_1min_before"] >= 0 and run["loadavg_1min_after"] >= 0


def test_with_load_warns_naming_the_run_above_the_limit(monkeypatch, capsys):
    monkeypatch.setattr(rounds.os, "getloadavg", lambda: (3.5, 0.0, 0.0))
    figures = rounds.with_load("the peer side", lambda: {"s": 1.0})
    assert figures == {"s": 1.0, "loadavg_1min_before": 3.5, "loadavg_1min_after": 3.5}
    assert "after the peer side (above 2.0)" in capsys.readouterr().err


def test_medians_and_the_highest_load_pass_over_failed_runs():
    runs = [
        {"s": 3.0, "loadavg_1min_before": 0.5, "loadavg_1min_after": 0.7},
        {"failed": "exit code 1"},
        {"s": 1.0, "loadavg_1min_before": 1.5, "loadavg_1min_after": 0.2},
        {"s": 2.0, "loadavg_1min_before": 0.1, "loadavg_1min_after": 0.3},
    ]
    assert rounds.medians(runs, ["s"]) == {"s": 2.0}
    assert rounds.max_load(runs) == 1.5
    # A run that failed after its load was recorded still counts for the load.
    runs.append({"failed": "row check", "loadavg_1min_before": 4.0, "loadavg_1min_after": 0.0})
    assert rounds.max_load(runs) == 4.0
