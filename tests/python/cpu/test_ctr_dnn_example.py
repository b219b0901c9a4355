"""The CTR-DNN example end to end: generated data from a planted model must be learnt close to
the teacher's oracle AUC and better than logistic regression; the real Criteo sample must
train without error through the same reader."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from fleet.testing.scripts import last_value, run_script

ROOT = pathlib.Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "ctr_dnn"
SHARED_DATA = pathlib.Path(os.environ.get("FLEET_SHARED_DATA", ROOT.parent / "shared" / "data"))
CRITEO_SAMPLE = SHARED_DATA / "criteo" / "criteo_kaggle_train_head1999.txt"


def _run(args, timeout=600):
    return run_script(args, timeout, ROOT)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("ctr_data")
    _run(
        [
            EXAMPLE / "generate_data.py",
            "--out",
            out,
            "--train_rows",
            200_000,
            "--test_rows",
            50_000,
            "--seed",
            5,
        ],
        timeout=300,
    )
    oracle = json.loads((out / "oracle.json").read_text())["oracle_auc"]
    return out / "train.txt", out / "test.txt", oracle


@pytest.mark.slow
def test_ctr_dnn_beats_logistic_regression_and_nears_the_oracle(generated):
    train, test, oracle = generated
    dnn = last_value(
        _run(
            [
                EXAMPLE / "train.py",
                "--train",
                train,
                "--test",
                test,
                "--epochs",
                1,
                "--print_period",
                200,
            ],
            timeout=900,
        ),
        "test_auc",
    )
    lr = last_value(
        _run([EXAMPLE / "baselines.py", "--train", train, "--test", test], timeout=600),
        "lr_test_auc",
    )
    assert dnn > lr, f"CTR-DNN AUC {dnn:.4f} does not beat logistic regression {lr:.4f}"
    assert dnn >= oracle - 0.03, f"CTR-DNN AUC {dnn:.4f} is not within 0.03 of oracle {oracle:.4f}"


@pytest.mark.skipif(
    not CRITEO_SAMPLE.exists(), reason=f"real Criteo sample not found at {CRITEO_SAMPLE}"
)
def test_real_criteo_sample_trains_through_the_reader(tmp_path):
    lines = CRITEO_SAMPLE.read_text().splitlines(keepends=True)
    train, test = tmp_path / "train.txt", tmp_path / "test.txt"
    train.write_text("".join(lines[:1600]))
    test.write_text("".join(lines[1600:]))
    out = _run(
        [
            EXAMPLE / "train.py",
            "--train",
            train,
            "--test",
            test,
            "--epochs",
            2,
            "--sparse_dim",
            100_003,
            "--print_period",
            2,
        ],
        timeout=300,
    )
    auc = last_value(out, "test_auc")
    assert 0.0 <= auc <= 1.0


def test_train_rejects_missing_file(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE / "train.py"),
            "--train",
            str(tmp_path / "nope.txt"),
            "--test",
            str(tmp_path / "nope.txt"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    assert "nope.txt does not exist" in proc.stderr
