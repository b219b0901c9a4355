"""Paddle 1.x CTR-DNN (network, pipe-command reader, local and parameter-server training, and
inference of the export), ported to Fleet by changing imports only: the scripts under
scripts/ctr_dnn_1x are the Paddle ones with their import lines replaced. They train on Criteo-
format rows of a planted model and must learn (held-out AUC well above chance)."""

from __future__ import annotations

import json
import pathlib
import shutil

import pytest

from tests.python.compat import jobs

SCRIPTS = pathlib.Path(__file__).parent / "scripts" / "ctr_dnn_1x"
# Chance is 0.5; the planted model's own AUC on these rows is about 0.79, and 12k rows of one
# epoch get CTR-DNN to about 0.70 (one process). Well above chance, well below what it reaches.
LEARNED_AUC = 0.6


def _copy_scripts(tmp_path: pathlib.Path) -> pathlib.Path:
    folder = tmp_path / "ctr_dnn"
    shutil.copytree(SCRIPTS, folder)
    return folder


def _infer(folder: pathlib.Path, model_dir: pathlib.Path, test_file: str) -> dict:
    result = jobs.run_script(folder / "infer.py", str(model_dir), test_file)
    assert result.returncode == 0, jobs.explain(result, folder)
    return json.loads((folder / "infer.json").read_text())


def test_local_training_and_inference_port_by_imports(tmp_path, criteo_small):
    folder = _copy_scripts(tmp_path)
    model_dir = tmp_path / "model"
    result = jobs.run_script(
        folder / "local_train.py", ",".join(criteo_small["train"]), str(model_dir)
    )
    assert result.returncode == 0, jobs.explain(result, folder)
    infer = _infer(folder, model_dir, criteo_small["test"])
    assert infer["rows"] == 4000
    assert infer["test_auc"] > LEARNED_AUC, infer


@pytest.mark.parametrize("mode", ["async", "sync", "geo"])
def test_parameter_server_training_ports_by_imports(tmp_path, criteo_small, mode):
    """fleetrun, 1 server and 2 workers, init_worker() before the startup program (the 1.x
    document's order), the first worker alone saving and exporting; the export, read in one
    process by the 1.x inference script, predicts the held-out rows."""
    folder = _copy_scripts(tmp_path)
    model_dir = tmp_path / "model"
    result = jobs.fleetrun(
        folder / "fleet_train.py",
        ["--server_num=1", "--worker_num=2"],
        mode,
        ",".join(criteo_small["train"]),
        str(model_dir),
        timeout=180,
    )
    assert result.returncode == 0, jobs.explain(result, folder)
    assert sorted(jobs.results(folder, "train")) == ["0", "1"]
    assert (model_dir / "checkpoint").is_dir()
    infer = _infer(folder, model_dir / "inference", criteo_small["test"])
    assert infer["test_auc"] > LEARNED_AUC, infer
