"""fluid.io in a collective job (fleetrun, 2 ranks, Gloo): the first rank saves persistables and
an inference model in Paddle's way; both read back in one process."""

from __future__ import annotations

import pathlib
import shutil

import numpy as np

import fleet
from tests.python.compat import jobs

SCRIPT = pathlib.Path(__file__).parent / "scripts" / "collective_io.py"


def test_first_rank_saves_with_fluid_io(tmp_path):
    folder = tmp_path / "job"
    folder.mkdir()
    script = folder / "train.py"
    shutil.copy(SCRIPT, script)
    result = jobs.fleetrun(script, ["--collective", "--nproc_per_node=2"], str(folder), timeout=120)
    assert result.returncode == 0, jobs.explain(result, folder)
    exe = fleet.Executor(fleet.CPUPlace())
    with fleet.scope_guard(fleet.core.Scope()):
        program, feeds, fetches = fleet.io.load_inference_model(str(folder / "export"), exe)
        xs = np.eye(4, dtype=np.float32)
        (out,) = exe.run(program, feed={"x": xs}, fetch_list=fetches)
    # y = x @ [1, -2, 0.5, 3]: 60 averaged steps of SGD get within 0.2 of it.
    np.testing.assert_allclose(out[:, 0], [1.0, -2.0, 0.5, 3.0], atol=0.2)
    saved = sorted(p.name for p in (folder / "ckpt").iterdir())
    assert any(name.endswith(".w_0") for name in saved), saved
