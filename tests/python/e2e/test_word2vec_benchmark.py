"""benchmarks/word2vec_geo.py runs end to end on a small slice (Fleet's async and GEO jobs on
samples drawn once, read with cat) and prints its JSON with every figure the issue asks for; the
PaddlePaddle peer is skipped (and said so), since it lives in its own peer environment. Skipped
when ../shared/data is absent."""

from __future__ import annotations

import pathlib

import pytest

from tests.python.e2e.benchmark_runs import run_benchmark

ROOT = pathlib.Path(__file__).resolve().parents[3]
CORPUS = ROOT.parent / "shared" / "data" / "text_corpus"


@pytest.mark.slow
@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"the text corpus is absent ({CORPUS})")
def test_small_run_reports_geo_against_async_and_says_the_peer_was_skipped():
    result = run_benchmark("word2vec_geo.py", "--max_words", "100000", "--skip_peer")
    assert set(result["runs"]) == {"async", "geo_100", "geo_400"}
    for run in result["runs"].values():
        assert run["words_per_sec"] > 0 and 0 < run["heldout_auc"] < 1
    assert set(result["geo_vs_async"]) == {"100", "400"}
    assert result["geo_ratio_vs_paddle"] is None
    assert "--skip_peer" in result["peer_note"]
