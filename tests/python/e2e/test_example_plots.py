"""`--plot FILE.png` of every example writes a training curve that matplotlib reads back at the
expected size (1500 x 450: loss/train AUC, samples/s, test metric per epoch), and the progress
lines carry step, samples/s and an ETA. word2vec's plot is checked in test_word2vec.py."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
MOVIELENS = ROOT.parent / "shared" / "data" / "movielens" / "ml-100k"
PNG_SHAPE = (450, 1500)


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1")


@pytest.fixture(scope="module")
def criteo(tmp_path_factory):
    out = tmp_path_factory.mktemp("plots")
    subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / "ctr_dnn" / "generate_data.py"),
            "--out",
            str(out),
            "--train_rows",
            "6000",
            "--test_rows",
            "2000",
            "--seed",
            "0",
        ],
        check=True,
        env=_env(),
        capture_output=True,
        timeout=120,
    )
    return str(out / "train.txt"), str(out / "test.txt")


def _run_and_read_plot(command: list[str], plot: pathlib.Path) -> str:
    result = subprocess.run(
        command, env=_env(), capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-3000:]
    import matplotlib.image

    image = matplotlib.image.imread(str(plot))
    assert image.shape[:2] == PNG_SHAPE
    assert image.std() > 0.01  # something was drawn
    assert re.search(r"step \d+, \d+ samples/s, ETA \d+:\d\d", out), out[-2000:]
    return out


@pytest.mark.parametrize(
    "script", ["ctr_dnn/train.py", "ctr_dnn/train_dataset.py", "wide_deep/train.py"]
)
def test_single_process_examples_plot(criteo, script, tmp_path):
    train, test = criteo
    plot = tmp_path / "curve.png"
    extra = ["--thread", "1"] if script.endswith("train_dataset.py") else []
    _run_and_read_plot(
        [
            sys.executable,
            str(EXAMPLES / script),
            "--train",
            train,
            "--test",
            test,
            "--epochs",
            "2",
            "--print_period",
            "3",
            "--plot",
            str(plot),
            *extra,
        ],
        plot,
    )


@pytest.mark.slow
def test_parameter_server_job_plots_worker_0(criteo, tmp_path):
    train, test = criteo
    plot = tmp_path / "ps.png"
    out = _run_and_read_plot(
        [
            sys.executable,
            "-m",
            "fleet.launch",
            "--server_num=1",
            "--worker_num=2",
            str(EXAMPLES / "ctr_dnn" / "train_ps.py"),
            "--mode",
            "async",
            "--train",
            train,
            "--test",
            test,
            "--print_period",
            "2",
            "--epochs",
            "2",
            "--plot",
            str(plot),
        ],
        plot,
    )
    assert "[worker.0] wrote" in out and "[worker.1] wrote" not in out
    # Every epoch's point is the job's AUC over all workers' shares of the test set.
    assert re.search(r"\[worker\.0\] epoch 1: test_auc=0\.\d+ \(all workers\)", out), out[-2000:]


@pytest.mark.skipif(not MOVIELENS.is_dir(), reason=f"MovieLens-100k is absent ({MOVIELENS})")
def test_movielens_plot(tmp_path):
    plot = tmp_path / "movielens.png"
    _run_and_read_plot(
        [
            sys.executable,
            str(EXAMPLES / "movielens_ctr" / "train.py"),
            "--data_dir",
            str(MOVIELENS),
            "--epochs",
            "2",
            "--print_period",
            "40",
            "--plot",
            str(plot),
        ],
        plot,
    )
