"""Rounds that hold on a shared machine, for the benchmarks that compare Fleet with a peer in the
same run (ps_train.py, ps_checkpoint.py).

The sides of a comparison run back to back in every round, so both see about the same load, and
take turns going first (the order reverses each round), so that neither always runs on the
warmer cache or the earlier part of a load that grows or ebbs. Every run records the 1-minute
load average before and after it, with a warning on stderr above LOAD_WARNING (2 cores: more
means another job shared them). A side's figure is its median over the rounds; the benchmark's
JSON keeps every round beside it.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from typing import Callable, Iterable, Sequence, TypeVar

# A 1-minute load average above this means the figures of that run are not a quiet machine's.
LOAD_WARNING = 2.0

T = TypeVar("T")


def in_turn(index: int, sides: Sequence[T]) -> list[T]:
    """`sides` in the order they run in round `index`: as given in even rounds, reversed in odd
    ones."""
    return list(sides) if index % 2 == 0 else list(reversed(sides))


def with_load(what: str, measure: Callable[[], dict]) -> dict:
    """Runs `measure` and returns its figures with loadavg_1min_before and loadavg_1min_after
    added; warns on stderr, naming `what`, when either is above LOAD_WARNING."""
    before = os.getloadavg()[0]
    figures = measure()
    after = os.getloadavg()[0]
    if max(before, after) > LOAD_WARNING:
        print(
            f"warning: load average {before:.2f} before, {after:.2f} after {what} "
            f"(above {LOAD_WARNING}): not a quiet machine's figures",
            file=sys.stderr,
            flush=True,
        )
    figures.update(loadavg_1min_before=round(before, 2), loadavg_1min_after=round(after, 2))
    return figures


def alternate(rounds: int, sides: dict[str, Callable[[], dict]]) -> dict[str, list[dict]]:
    """Runs every side once a round for `rounds` rounds, in turn (in_turn over the order of
    `sides`), each under with_load and tagged with its "round"; logs each run to stderr.
    Returns each side's runs in round order."""
    runs: dict[str, list[dict]] = {name: [] for name in sides}
    for index in range(rounds):
        for name in in_turn(index, list(sides)):
            result = with_load(f"the {name} side", sides[name])
            result["round"] = index
            runs[name].append(result)
            print(f"round {index} {name}: {json.dumps(result)[:300]}", file=sys.stderr, flush=True)
    return runs


def medians(runs: Iterable[dict], keys: Iterable[str]) -> dict[str, float]:
    """The median of each of `keys` over the runs that did not fail (have no "failed" key)."""
    ok = [r for r in runs if "failed" not in r]
    return {key: statistics.median(r[key] for r in ok) for key in keys}


def max_load(runs: Iterable[dict]) -> float:
    """The highest 1-minute load average recorded before or after any of `runs` (those that
    failed before their load was recorded are passed over)."""
    return max(
        max(r["loadavg_1min_before"], r["loadavg_1min_after"])
        for r in runs
        if "loadavg_1min_before" in r
    )
