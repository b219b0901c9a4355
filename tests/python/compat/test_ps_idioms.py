"""Paddle's call orders and save idioms in parameter-server jobs (fleetrun, 1 server, 2 workers):
each used to hang or fail, and each must now finish in seconds."""

from __future__ import annotations

import pathlib
import shutil

import numpy as np
import pytest

import fleet
from tests.python.compat import jobs

SCRIPT = pathlib.Path(__file__).parent / "scripts" / "ps_idioms.py"
MODES = ["sync", "async", "half_async", "geo"]


def _run(tmp_path: pathlib.Path, mode: str, scenario: str, timeout: float = 90):
    folder = tmp_path / "job"
    folder.mkdir()
    script = folder / "train.py"
    shutil.copy(SCRIPT, script)
    result = jobs.fleetrun(
        script, ["--server_num=1", "--worker_num=2"], mode, scenario, str(folder), timeout=timeout
    )
    return folder, result


def _predicts(export_dir: pathlib.Path) -> np.ndarray:
    exe = fleet.Executor(fleet.CPUPlace())
    with fleet.scope_guard(fleet.core.Scope()):
        program, feeds, fetches = fleet.io.load_inference_model(str(export_dir), exe)
        feed = {
            "ids": fleet.create_lod_tensor(np.arange(4, dtype=np.int64).reshape(4, 1), [[1] * 4]),
            "x": np.ones((4, 4), np.float32),
        }
        (out,) = exe.run(program, feed=feed, fetch_list=fetches)
    return out


@pytest.mark.parametrize("mode", MODES)
def test_init_worker_before_the_startup_program(tmp_path, mode):
    """The 1.x best-practice order: no NotFound, no silent wait for the step timeout."""
    folder, result = _run(tmp_path, mode, "order")
    assert result.returncode == 0, jobs.explain(result, folder)
    assert sorted(jobs.results(folder, "done")) == ["0", "1"]
    assert (folder / "ckpt").is_dir()
    out = _predicts(folder / "export")
    assert out.shape == (4, 2) and np.allclose(out.sum(axis=1), 1.0)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_first_worker_saves_alone_while_the_other_trains_on(tmp_path, mode):
    folder, result = _run(tmp_path, mode, "first")
    assert result.returncode == 0, jobs.explain(result, folder)
    other_steps = 8 if mode == "sync" else 40
    assert jobs.results(folder, "done") == {"0": {"steps": 8}, "1": {"steps": other_steps}}
    assert (folder / "ckpt").is_dir() and (folder / "export").is_dir()


def test_fluid_io_saves_a_parameter_server_job(tmp_path):
    folder, result = _run(tmp_path, "async", "fluid_io")
    assert result.returncode == 0, jobs.explain(result, folder)
    assert (folder / "ckpt").is_dir()
    out = _predicts(folder / "export")
    assert out.shape == (4, 2) and np.allclose(out.sum(axis=1), 1.0)


def test_every_worker_saving_keeps_working(tmp_path):
    folder, result = _run(tmp_path, "async", "every")
    assert result.returncode == 0, jobs.explain(result, folder)
    assert sorted(jobs.results(folder, "done")) == ["0", "1"]
    assert (folder / "ckpt").is_dir()
    assert _predicts(folder / "export").shape == (4, 2)


def test_a_save_after_stop_worker_says_so(tmp_path):
    folder, result = _run(tmp_path, "async", "stopped")
    assert result.returncode == 0, jobs.explain(result, folder)
    errors = jobs.results(folder, "error")
    assert sorted(errors) == ["0", "1"]
    for error in errors.values():
        assert error["type"] == "InvalidArgument", error
        assert "stopped by stop_worker()" in error["message"], error
        assert "save before" in error["message"], error


def test_a_save_into_a_file_fails_on_every_worker_naming_the_path(tmp_path):
    folder, result = _run(tmp_path, "async", "file")
    assert result.returncode == 0, jobs.explain(result, folder)
    errors = jobs.results(folder, "error")
    assert sorted(errors) == ["0", "1"]
    for error in errors.values():
        assert error["type"] == "InvalidArgument", error
        assert str(folder / "a_file") in error["message"], error


def test_workers_in_different_calls_are_named_in_the_error(tmp_path):
    """Worker 0 in load_model while worker 1 is in stop_worker: worker 0's load_model times out
    (after its timeout) with an error naming both calls and the worker; then both stop."""
    folder, result = _run(tmp_path, "async", "mismatch")
    assert result.returncode == 0, jobs.explain(result, folder)
    error = jobs.results(folder, "error")["0"]
    assert error["type"] == "Timeout", error
    assert "fleet.load_model()" in error["message"], error
    assert "worker 1 waits in barrier '__stop_worker__' (fleet.stop_worker())" in error["message"]
