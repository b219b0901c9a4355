"""word2vec (examples/word2vec) on a slice of the shared public-domain corpus: one process, and a
2-worker job in GEO and in async through fleetrun, each reach a held-out AUC an untrained model
cannot (0.5); GEO lands within GEO_VS_ASYNC of async. Skipped when ../shared/data is absent (the
corpus is not in the repository)."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "word2vec"
CORPUS = pathlib.Path(
    os.environ.get("FLEET_TEXT_CORPUS", ROOT.parent / "shared" / "data" / "text_corpus")
)
# 300k corpus words (271k training words, vocabulary 3.9k), 1 epoch, dim 64, Adagrad 0.2.
# Measured: one process 0.631-0.632, 2 workers GEO (k=100) 0.63-0.64, async 0.63-0.64
# (2 epochs: 0.64). Untrained: 0.50.
MIN_HELDOUT_AUC = 0.60
# Async is not deterministic (which worker's push a server applies first depends on thread
# timing), and GEO's exchanges depend on it too: each run lands anywhere in the ranges above,
# 0.01 wide each, so two runs can differ by up to their sum. 0.01 failed once on a loaded
# machine (0.0104 apart, issue 29); 0.02 is the spread the measured ranges allow. A larger gap
# would mean one mode trains worse, which is what this test is for.
GEO_VS_ASYNC = 0.02

pytestmark = pytest.mark.skipif(
    not CORPUS.is_dir(), reason=f"the text corpus is absent ({CORPUS}): see shared/data/README.md"
)


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1")


def _value(output: str, key: str) -> float:
    found = re.findall(rf"{key}=([0-9.]+)", output)
    assert found, f"no {key}= in:\n{output[-3000:]}"
    return float(found[-1])


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("w2v") / "data"
    subprocess.run(
        [
            sys.executable,
            str(EXAMPLE / "corpus.py"),
            "--corpus",
            str(CORPUS),
            "--out",
            str(out),
            "--max_words",
            "300000",
            "--parts",
            "2",
        ],
        check=True,
        env=_env(),
        capture_output=True,
        timeout=120,
    )
    return out


def _train(data: pathlib.Path, *args: str, workers: int = 0) -> str:
    script = [str(EXAMPLE / "train.py"), "--data", str(data), "--print_period", "100000", *args]
    launch = ["-m", "fleet.launch", "--server_num=1", f"--worker_num={workers}"] if workers else []
    result = subprocess.run(
        [sys.executable, *launch, *script],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout + result.stderr


@pytest.mark.slow
def test_single_process_learns_and_plots(prepared, tmp_path):
    plot = tmp_path / "w2v.png"
    out = _train(prepared, "--plot", str(plot), "--print_period", "500")
    assert _value(out, "heldout_auc") > MIN_HELDOUT_AUC
    assert "neighbours of man:" in out
    assert re.search(r"step \d+, \d+ samples/s, ETA \d+:\d\d", out), out[-2000:]
    import matplotlib.image

    image = matplotlib.image.imread(str(plot))
    assert image.shape[:2] == (450, 1500)
    assert image.std() > 0.01  # not a blank canvas


@pytest.mark.slow
def test_two_workers_geo_matches_async(prepared):
    geo = _train(prepared, "--mode", "geo", "--update_frequency", "100", workers=2)
    asynchronous = _train(prepared, "--mode", "async", workers=2)
    geo_auc, async_auc = _value(geo, "heldout_auc"), _value(asynchronous, "heldout_auc")
    assert geo_auc > MIN_HELDOUT_AUC and async_auc > MIN_HELDOUT_AUC
    assert abs(geo_auc - async_auc) <= GEO_VS_ASYNC, (geo_auc, async_auc)
    assert _value(geo, "total_words") == _value(asynchronous, "total_words") > 250_000
