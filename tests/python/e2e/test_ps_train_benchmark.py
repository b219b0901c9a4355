"""benchmarks/ps_train.py: --quick runs Fleet's three parameter-server modes and the single
process through fleetrun and ends with one JSON line holding the issue's keys, sane AUCs and each
job's CPU seconds per sample; the comparison logic takes medians over rounds, substitutes
Paddle's single-process run for its crashing sync mode and says so."""

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
    "async_vs_single",
    "sync_vs_single",
    "geo_vs_single",
    "async_auc_gap",
    "fleet_single_cpu_s_per_sample",
    "fleet_async_cpu_s_per_sample",
    "targets",
    "notes",
    "rounds_detail",
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
    # 200k rows, one epoch: the single process and the PS modes reach 0.75-0.77 (the teacher's
    # own AUC is 0.80); a broken exchange gives about 0.5.
    assert 0.65 < result["fleet_single_auc"] <= result["oracle_auc"]
    for mode in ps_train.MODES:
        assert 0.6 < result[f"{mode}_auc"] <= result["oracle_auc"], mode
        assert result[f"{mode}_samples_per_sec"] > 0
        job = result["rounds_detail"][0]["fleet"][mode]
        workers = job["workers"]
        assert sorted(workers) == ["0", "1"]
        assert workers["0"]["samples"] == workers["1"]["samples"] == 100_000
        # The job's CPU over the samples it trained (cpu_s is rounded to 10 ms).
        assert job["cpu_s"] > 0
        assert job["cpu_s_per_sample"] == pytest.approx(job["cpu_s"] / 200_000, abs=1e-7)
        assert result[f"fleet_{mode}_cpu_s_per_sample"] == job["cpu_s_per_sample"]
        assert result[f"{mode}_vs_single"] == pytest.approx(
            result[f"{mode}_samples_per_sec"] / result["fleet_single_samples_per_sec"], rel=1e-2
        )
    assert 0.6 < result["async_unbounded_auc"] <= result["oracle_auc"]
    assert result["rounds"] == 1 and len(result["rounds_detail"]) == 1


def _figures(rate: float, auc: float, load: float = 0.5) -> dict:
    return {
        "samples_per_sec": rate,
        "test_auc": auc,
        "cpu_s_per_sample": 1e-4,
        "loadavg_1min_before": load,
        "loadavg_1min_after": load,
    }


def test_a_job_over_rounds_is_its_medians_and_its_highest_load():
    runs = [_figures(9000, 0.77, 0.4), _figures(7000, 0.76, 2.5), _figures(8000, 0.78, 1.0)]
    median = ps_train.median_job(runs)
    assert median["samples_per_sec"] == 8000 and median["test_auc"] == 0.77
    assert median["rounds"] == 3 and median["max_loadavg_1min"] == 2.5
    failed = ps_train.median_job([{"failed": "SIGSEGV"}, _figures(100, 0.7)])
    assert failed["samples_per_sec"] == 100 and failed["failed_rounds"] == ["SIGSEGV"]
    assert ps_train.median_job([{"failed": "SIGSEGV"}]) == {"failed": "SIGSEGV"}


def test_sync_is_compared_with_paddle_single_process_while_paddle_sync_fails():
    args = argparse.Namespace(
        quick=True,
        rounds=1,
        rows=100,
        test_rows=10,
        driver="dataset",
        reader="cat",
        thread=1,
        servers=1,
        workers=2,
        local_transport="shm",
    )
    data = {"oracle_auc": 0.8}
    fleet = {
        "single": _figures(5000, 0.772),
        "async": _figures(9000, 0.77),
        "geo": _figures(8000, 0.771),
        "sync": _figures(7000, 0.7725),
        "async_unbounded": _figures(10500, 0.76),
    }
    paddle = {
        "single": {**_figures(3000, 0.76), "version": "2.6.2"},
        "async": _figures(6000, 0.75),
        "geo": _figures(4000, 0.772, load=3.0),
        "sync": {"failed": "SIGSEGV in SendBarrierOp"},
    }
    fleet = {job: ps_train.median_job([figures]) for job, figures in fleet.items()}
    paddle = {job: ps_train.median_job([figures]) for job, figures in paddle.items()}
    result = ps_train.build_result(args, data, fleet, paddle, rounds=[])
    assert result["async_ratio_vs_paddle"] == 1.5
    assert result["async_unbounded_ratio_vs_paddle"] == 1.75
    assert result["geo_ratio_vs_paddle"] == 2.0
    assert result["sync_ratio_vs_paddle"] == pytest.approx(7000 / 3000, abs=1e-3)
    assert result["sync_ratio_vs"] == "paddle_single"
    assert result["local_transport"] == "shm"
    assert result["paddle_sync_failed"] == "SIGSEGV in SendBarrierOp"
    assert any("sync mode failed" in note for note in result["notes"])
    assert result["async_vs_single"] == 1.8 and result["geo_vs_single"] == 1.6
    assert result["sync_vs_single"] == 1.4
    assert result["async_auc_gap"] == pytest.approx(0.002)
    assert result["max_loadavg_1min"] == 3.0
    assert any("not a quiet machine" in note for note in result["notes"])
    targets = result["targets"]
    assert targets["async_vs_single_at_least_1.6"] and not targets["sync_vs_single_at_least_1.5"]
    assert targets["geo_ratio_at_least_2.0"] and not targets["async_ratio_at_least_2.0"]
    assert not targets["geo_auc_not_below_paddle"]  # 0.771 < 0.772
    assert targets["sync_auc_not_below_paddle"] is None  # no Paddle sync AUC
