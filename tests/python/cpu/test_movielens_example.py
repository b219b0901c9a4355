"""The MovieLens-100k example trains a DeepFM through pipe_command readers and two trainer
threads, and beats a logistic regression over user and item ids on the same split."""

import os
import pathlib
import sys

import pytest

from fleet.testing.scripts import last_value, run_script

ROOT = pathlib.Path(__file__).resolve().parents[3]
SHARED_DATA = pathlib.Path(os.environ.get("FLEET_SHARED_DATA", ROOT.parent / "shared" / "data"))
ML100K = SHARED_DATA / "movielens" / "ml-100k"
# Paired margins measured over split seeds 1-3: +0.0066, +0.0077, +0.0062.
MARGIN = 0.003


@pytest.mark.slow
@pytest.mark.skipif(
    not (ML100K / "u.data.head80000").exists(), reason=f"MovieLens-100k not found at {ML100K}"
)
def test_deepfm_beats_logistic_regression_on_user_and_item_ids():
    output = run_script(
        [ROOT / "examples" / "movielens_ctr" / "train.py", "--data_dir", ML100K],
        timeout=300,
        cwd=ROOT,
    )
    dnn, lr = last_value(output, "test_auc"), last_value(output, "lr_test_auc")
    assert 0.74 < lr < 0.80, f"logistic regression AUC {lr:.4f} outside its usual band"
    assert dnn > lr + MARGIN, f"DeepFM AUC {dnn:.4f} does not beat LR {lr:.4f} by {MARGIN}"
    assert dnn < 0.85, f"DeepFM AUC {dnn:.4f} is implausibly high (label leak?)"
    assert output.count("epoch ") == 6, output[-1500:]


def test_reader_rejects_unknown_users_naming_the_line(tmp_path):
    if not (ML100K / "u.user").exists():
        pytest.skip(f"MovieLens-100k not found at {ML100K}")
    sys.path.insert(0, str(ROOT / "examples" / "movielens_ctr"))
    import reader  # the example's module

    ratings = tmp_path / "ratings.txt"
    ratings.write_text("1\t1\t5\t0\n99999\t1\t5\t0\n")
    with pytest.raises(ValueError, match=r"ratings.txt:2: user 99999 is not in u.user"):
        list(reader.read_samples(str(ratings), reader.Tables(str(ML100K))))
