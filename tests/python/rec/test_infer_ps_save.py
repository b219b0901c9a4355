"""fleet.rec.static_infer evaluates what a parameter-server job saved (the checkpoint of each
epoch and the inference export beside it) in one process, as it does a one-process save; a
checkpoint without its export is refused with the setting that writes one."""

from __future__ import annotations

import shutil

import pytest

from tests.python.rec import rec_jobs

pytestmark = pytest.mark.timeout(300)
PS, INFER = "fleet.rec.static_ps_trainer", "fleet.rec.static_infer"


def test_static_infer_reads_a_parameter_server_save(tmp_path):
    config = rec_jobs.user_model(tmp_path)
    job = rec_jobs.run_fleetrun(
        tmp_path, ["--server_num=1", "--worker_num=2"], PS, config, "runner.sync_mode=async"
    )
    assert job.returncode == 0, rec_jobs.logs(tmp_path)[-3000:]
    saved = tmp_path / "output"
    assert (saved / "1" / "ps_manifest.json").is_file()
    assert not (saved / "1" / "rec_static.npz").exists()

    inferred = rec_jobs.run_module(tmp_path, INFER, config)
    assert inferred.returncode == 0, inferred.stdout[-3000:] + inferred.stderr[-3000:]
    epochs = rec_jobs.epoch_metrics(inferred.stdout)
    assert [e["epoch"] for e in epochs] == [0, 1]
    assert all(e["samples"] == 300 for e in epochs)
    # The test rows of the planted model: an untrained model is at 0.5 give or take 0.05 on
    # 300 rows; the one-process test of this folder reaches above 0.7, as the PS job does.
    print(f"static_infer of the PS job's saves: test AUC {[e['auc'] for e in epochs]}")
    assert epochs[-1]["auc"] > 0.7, inferred.stdout[-2000:]

    shutil.rmtree(saved / "1" / "rec_inference")
    refused = rec_jobs.run_module(tmp_path, INFER, config)
    assert refused.returncode == 2
    assert "output/1 is a parameter-server checkpoint without its inference" in refused.stderr
    assert "runner.use_inference: True" in refused.stderr
