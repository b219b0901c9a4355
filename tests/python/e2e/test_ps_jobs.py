"""Parameter-server jobs that last, across real fleetrun processes on 127.0.0.1: a job stopped
after a checkpoint and resumed from it (on the same or another number of servers) ends where one
uninterrupted job does; the exported inference model predicts without servers what the job
predicted; fleet.metrics' global AUC equals the AUC of every worker's predictions pooled."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest

import fleet
from fleet import _core
from fleet.metrics import auc_of_histograms
from tests.python.e2e import launch_helpers as lh

SCRIPT = pathlib.Path(__file__).parent / "scripts" / "ps_jobs.py"
sys.path.insert(0, str(SCRIPT.parent))
from ps_equivalence import VOCAB, feed_of  # noqa: E402
from ps_jobs import TEST_BATCHES, eval_batch  # noqa: E402


def _job(
    job_dir: pathlib.Path, servers: int, *args: str, timeout: float = 150, launch: tuple = ()
) -> str:
    job_dir.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "fleet.launch",
            f"--server_num={servers}",
            "--worker_num=2",
            *launch,
            str(SCRIPT),
            *args,
        ],
        env=lh.job_env(job_dir),
        cwd=lh.REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return result.stdout + result.stderr


def _params(path: pathlib.Path) -> dict:
    return dict(np.load(path))


@pytest.mark.slow
@pytest.mark.parametrize("resume_servers", [1, 2])
def test_resumed_job_ends_where_one_uninterrupted_job_does(tmp_path, resume_servers):
    _job(tmp_path / "whole", 1, "--begin", "0", "--end", "6", "--out", str(tmp_path / "whole.npz"))
    ckpt = tmp_path / "ckpt"
    _job(
        tmp_path / "first",
        1,
        "--begin",
        "0",
        "--end",
        "3",
        "--save_dir",
        str(ckpt),
        "--out",
        str(tmp_path / "first.npz"),
    )
    assert (ckpt / "ps_manifest.json").exists()
    _job(
        tmp_path / "second",
        resume_servers,
        "--begin",
        "3",
        "--end",
        "6",
        "--resume",
        str(ckpt),
        "--out",
        str(tmp_path / "second.npz"),
    )
    whole, first, second = (_params(tmp_path / f"{n}.npz") for n in ("whole", "first", "second"))
    assert set(whole) == set(second)
    for name in whole:
        np.testing.assert_allclose(second[name], whole[name], atol=1e-6, rtol=0, err_msg=name)
    # Epoch 2 moved the parameters: the resumed job did train, from the checkpoint's values.
    assert np.abs(whole["rows"] - first["rows"]).max() > 1e-3


@pytest.mark.slow
def test_a_job_resumes_from_a_values_only_save_and_trains(tmp_path):
    """save_persistables(mode=2) with Adagrad on the servers: the sparse part holds values only
    (half the bytes of a base save's), and a job started from it trains on."""
    from fleet.ps.checkpoint import read_manifest

    parts = {}
    for mode in (0, 2):
        ckpt = tmp_path / f"ckpt{mode}"
        common = ["--optimizer", "adagrad", "--save_dir", str(ckpt), "--save_mode", str(mode)]
        _job(tmp_path / f"first{mode}", 1, "--end", "3", *common, "--out", str(ckpt) + ".npz")
        sparse = [t for t in read_manifest(str(ckpt)).tables if t.type == 1][0]
        assert [s.mode for s in sparse.saves] == [mode]
        parts[mode] = sum(f.bytes - 72 for f in sparse.saves[0].files)  # without headers
    # Records of key + values against key + values + accumulators (dim >= 4: at most 0.6).
    assert 0 < parts[2] < 0.75 * parts[0], parts
    _job(
        tmp_path / "second",
        1,
        "--optimizer",
        "adagrad",
        "--begin",
        "3",
        "--end",
        "6",
        "--resume",
        str(tmp_path / "ckpt2"),
        "--out",
        str(tmp_path / "second.npz"),
    )
    first, second = _params(tmp_path / "ckpt2.npz"), _params(tmp_path / "second.npz")
    assert np.abs(second["rows"] - first["rows"]).max() > 1e-3  # it trained from the values


def _pooled_auc(preds: np.ndarray, labels: np.ndarray, thresholds: int = 4095) -> float:
    # The auc op's histogram of all predictions at once (bin floor(p * thresholds)).
    bins = (preds[:, 1].astype(np.float32) * np.float32(thresholds)).astype(np.int64)
    pos = np.bincount(bins[labels[:, 0] == 1], minlength=thresholds + 1)
    neg = np.bincount(bins[labels[:, 0] == 0], minlength=thresholds + 1)
    return auc_of_histograms(pos, neg)


def _rank_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    pos, neg = scores[labels == 1], scores[labels == 0]
    return float(
        ((pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum())
        / (len(pos) * len(neg))
    )


@pytest.mark.slow
def test_export_predicts_without_servers_and_global_metrics_pool_the_workers(tmp_path):
    export = tmp_path / "export"
    _job(
        tmp_path / "job",
        2,
        "--end",
        "4",
        "--export_dir",
        str(export),
        "--eval_out_prefix",
        str(tmp_path / "eval-"),
        "--out",
        str(tmp_path / "p.npz"),
    )
    evals = [dict(np.load(tmp_path / f"eval-{w}.npz")) for w in range(2)]
    preds = np.concatenate([e["preds"] for e in evals])
    labels = np.concatenate([e["labels"] for e in evals])
    # Every worker got the same global values, and the AUC is that of all predictions pooled.
    assert float(evals[0]["auc"]) == float(evals[1]["auc"])
    assert abs(float(evals[0]["auc"]) - _pooled_auc(preds, labels)) < 1e-12
    assert abs(float(evals[0]["auc"]) - _rank_auc(preds[:, 1], labels[:, 0])) < 0.02
    n = len(preds)
    assert float(evals[0]["sum"][0]) == n and float(evals[0]["max"][0]) == n // 2
    pooled_acc = float(((preds[:, 1] > 0.5) == (labels[:, 0] == 1)).mean())
    assert abs(float(evals[0]["acc"]) - pooled_acc) < 1e-12

    # One process, no server: the exported model predicts each worker's share as the job did.
    scope = _core.Scope()
    program, feed_names, targets = fleet.load_inference_model(str(export), None, scope=scope)
    assert feed_names == ["ids", "x"]
    assert "pull_sparse" not in {op.type for op in program.global_block().ops}
    exe = fleet.Executor(fleet.CPUPlace())
    for w in range(2):
        for i in range(TEST_BATCHES):
            data = eval_batch(i, w)
            feed = feed_of([data])
            (got,) = exe.run(
                program, feed={k: feed[k] for k in feed_names}, fetch_list=targets, scope=scope
            )
            want = evals[w]["preds"][16 * i : 16 * (i + 1)]
            np.testing.assert_allclose(got, want, atol=1e-6, rtol=0)


@pytest.mark.slow
def test_shrink_after_a_save_and_the_count_filter_from_the_strategy(tmp_path):
    # Every row was last touched before the save: shrink(0) drops all VOCAB of them.
    _job(
        tmp_path / "shrink",
        1,
        "--end",
        "2",
        "--save_dir",
        str(tmp_path / "ckpt"),
        "--shrink",
        "0",
        "--out",
        str(tmp_path / "shrink.npz"),
    )
    assert int(np.load(tmp_path / "shrink.npz")["dropped"]) == VOCAB
    # A count filter far above the pulls of 2 steps admits no id: all are still being counted.
    _job(
        tmp_path / "filter",
        1,
        "--end",
        "2",
        "--count_filter",
        "1000000",
        "--out",
        str(tmp_path / "filter.npz"),
    )
    assert int(np.load(tmp_path / "filter.npz")["filtered"]) == VOCAB


@pytest.mark.slow
def test_fleetrun_restarts_a_failed_job_from_its_latest_checkpoint(tmp_path):
    _job(tmp_path / "whole", 1, "--end", "6", "--out", str(tmp_path / "whole.npz"))
    ckpt = tmp_path / "ckpt"
    out = _job(
        tmp_path / "crash",
        1,
        "--end",
        "6",
        "--crash_at",
        "3",
        "--save_dir",
        str(ckpt),
        "--out",
        str(tmp_path / "restarted.npz"),
        launch=("--max_restarts=2", f"--checkpoint_dir={ckpt}"),
    )
    # One restart, logged with its cause and the checkpoint it resumed from.
    assert out.count("fleetrun: restart ") == 1, out[-3000:]
    assert f"restart 1 of 2 from checkpoint {ckpt}" in out
    assert "exited with 3" in out
    whole, restarted = _params(tmp_path / "whole.npz"), _params(tmp_path / "restarted.npz")
    for name in whole:
        np.testing.assert_allclose(restarted[name], whole[name], atol=1e-6, rtol=0, err_msg=name)
