"""benchmarks/ps_train.py: --quick runs Fleet's three parameter-server modes and the single
process through fleetrun and ends with one JSON line holding the issue's keys and sane AUCs; the
comparison logic substitutes Paddle's single-process run for its crashing sync mode and says so."""

from __future__ import annotations

import argparse
import sys

import pytest

from tests.python.conftest import REPO_ROOT
from tests.python.e2e.benchmark_runs import run_benchmark

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
import ps_train  # noqa: E402

REQUIRED_KEYS = (
    "async_ratio_vs_paddle",
    "geo_ratio_vs_paddle",
    "sync_ratio_vs_paddle",
    "async_auc",
    "geo_auc",
    "sync_auc",
    "paddle_async_auc",
    "paddle_geo_auc",
    "async_samples_per_sec",
    "geo_samples_per_sec",
    "sync_samples_per_sec",
    "fleet_single_auc",
    "fleet_single_samples_per_sec",
    "targets",
    "notes",
)


@pytest.mark.slow
def test_quick_run_without_the_peer_reports_every_fleet_mode(tmp_path):
    result = run_benchmark(
        "ps_train.py", "--quick", "--skip_peer", "--data_dir", str(tmp_path), timeout=400
    )
    for key in REQUIRED_KEYS:
        assert key in result, key
    assert result["async_ratio_vs_paddle"] is None
    assert result["reader"] == "multislot"  # both sides read MultiSlot files through cat
    assert any("skipped" in note for note in result["notes"])
    # 30k rows, one epoch: the single process reached 0.73 and the PS modes 0.68-0.69 in our
    # runs (the teacher's own AUC is 0.80); a broken exchange gives about 0.5.
    assert 0.65 < result["fleet_single_auc"] <= result["oracle_auc"]
    for mode in ps_train.MODES:
        assert 0.6 < result[f"{mode}_auc"] <= result["oracle_auc"], mode
        assert result[f"{mode}_samples_per_sec"] > 0
        workers = result["fleet_jobs"][mode]["workers"]
        assert sorted(workers) == ["0", "1"]
        assert workers["0"]["samples"] == workers["1"]["samples"] == 15_000
    assert 0.6 < result["async_unbounded_auc"] <= result["oracle_auc"]


def _figures(rate: float, auc: float) -> dict:
    return {"samples_per_sec": rate, "test_auc": auc}


def test_sync_is_compared_with_paddle_single_process_while_paddle_sync_fails():
    args = argparse.Namespace(quick=True, rows=100, test_rows=10, driver="dataset", reader="cat")
    data = {"oracle_auc": 0.8}
    fleet = {
        "async": _figures(9000, 0.77),
        "geo": _figures(8000, 0.771),
        "sync": _figures(7000, 0.7725),
        "async_unbounded": _figures(10500, 0.76),
    }
    paddle = {
        "single": {**_figures(3000, 0.76), "version": "2.6.2"},
        "async": _figures(6000, 0.75),
        "geo": _figures(4000, 0.772),
        "sync": {"failed": "SIGSEGV in SendBarrierOp"},
    }
    result = ps_train.build_result(args, data, fleet, _figures(20000, 0.772), paddle)
    assert result["async_ratio_vs_paddle"] == 1.5
    assert result["async_unbounded_ratio_vs_paddle"] == 1.75
    assert result["geo_ratio_vs_paddle"] == 2.0
    assert result["sync_ratio_vs_paddle"] == pytest.approx(7000 / 3000, abs=1e-3)
    assert result["sync_ratio_vs"] == "paddle_single"
    assert result["paddle_sync_failed"] == "SIGSEGV in SendBarrierOp"
    assert any("sync mode failed" in note for note in result["notes"])
    targets = result["targets"]
    assert targets["async_ratio_at_least_1.5"] and targets["sync_ratio_at_least_2.0"]
    assert not targets["geo_auc_not_below_paddle"]  # 0.771 < 0.772
    assert targets["sync_auc_not_below_paddle"] is None  # no Paddle sync AUC
