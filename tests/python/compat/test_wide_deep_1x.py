"""Paddle 1.x Wide & Deep (PaddleRec 1.7's network: TruncatedNormal, an L2-regularised wide part,
clip, create_tensor, `1 - pred`, accuracy with total=, auc) ported by its import, trained in one
process on rows of a planted wide-and-deep model, exported with fluid.io and served."""

from __future__ import annotations

import json
import pathlib
import shutil

import numpy as np
import pytest

import fleet
from tests.python.compat import jobs

SCRIPTS = pathlib.Path(__file__).parent / "scripts" / "wide_deep_1x"
NEEDS = ("clip", "create_tensor")


def _auc(labels: np.ndarray, scores: np.ndarray) -> float:
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    pos = labels == 1
    return float((ranks[pos].sum() - pos.sum() * (pos.sum() + 1) / 2) / (pos.sum() * (~pos).sum()))


def _planted_rows(path: pathlib.Path, rows: int = 6000) -> dict[str, np.ndarray]:
    """Census-shaped inputs (8 wide, 58 deep features) whose click depends linearly on the wide
    features and through a product of two deep features on the deep ones."""
    rng = np.random.default_rng(3)
    wide = rng.standard_normal((rows, 8)).astype(np.float32)
    deep = rng.standard_normal((rows, 58)).astype(np.float32)
    logit = wide @ rng.standard_normal(8) * 0.7 + 1.5 * deep[:, 0] * deep[:, 1]
    label = (rng.random(rows) < 1 / (1 + np.exp(-logit))).astype(np.float32).reshape(-1, 1)
    data = {"wide": wide, "deep": deep, "label": label}
    np.savez(path, **data)
    return data


@pytest.mark.skipif(
    not all(hasattr(fleet.layers, n) for n in NEEDS), reason="needs issue 24's layers (H4)"
)
def test_wide_and_deep_ports_by_imports_and_learns(tmp_path):
    folder = tmp_path / "wide_deep"
    shutil.copytree(SCRIPTS, folder)
    data = _planted_rows(tmp_path / "rows.npz")
    result = jobs.run_script(folder / "train.py", str(tmp_path / "rows.npz"), str(folder))
    assert result.returncode == 0, jobs.explain(result, folder)
    trained = json.loads((folder / "train.json").read_text())
    assert np.isfinite(trained["loss"])
    exe = fleet.Executor(fleet.CPUPlace())
    held_out = slice(len(data["label"]) * 4 // 5, None)
    with fleet.scope_guard(fleet.core.Scope()):
        program, feeds, fetches = fleet.io.load_inference_model(str(folder / "model"), exe)
        (pred,) = exe.run(
            program,
            feed={"wide_input": data["wide"][held_out], "deep_input": data["deep"][held_out]},
            fetch_list=fetches,
        )
    # Chance is 0.5; the planted model's own AUC on these rows is about 0.8.
    assert _auc(data["label"][held_out, 0], pred[:, 0]) > 0.65
