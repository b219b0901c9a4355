"""The README's code runs as shown: its Python blocks (the first two in one process, as a reader
would paste them, with the files the dataset block names; the parameter-server script under
`fleetrun --server_num=2 --worker_num=2` as the README says; the data-parallel block after the
first), so that nothing it shows fails."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _blocks() -> list[str]:
    return BLOCK.findall((ROOT / "README.md").read_text())


def _run(code: str, cwd: pathlib.Path, *command: str, timeout: float = 120):
    script = cwd / "snippet.py"
    script.write_text(code)
    return subprocess.run(
        [*command, str(script)] if command else [sys.executable, str(script)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={
            "PYTHONPATH": str(ROOT),
            "PATH": str(ROOT / ".venv/bin") + ":/usr/bin:/bin",
            "OPENBLAS_NUM_THREADS": "1",
        },
    )


def test_the_readme_has_the_blocks_this_test_runs():
    blocks = _blocks()
    assert len(blocks) == 4, "update this test with the README's Python blocks"
    assert "train_from_dataset" in blocks[1] and "fleet.init()" in blocks[2]
    assert "with_data_parallel" in blocks[3]


def test_using_fleet_and_datasets_blocks(tmp_path):
    blocks = _blocks()
    # What the dataset block reads: MultiSlot lines (ids: a count then the ids; label: 1 value),
    # and `python reader.py`, a pipe_command that passes each file through.
    for name in ("part-0", "part-1"):
        (tmp_path / name).write_text("2 3 5 1 1\n1 7 1 0\n3 1 2 3 1 1\n")
    (tmp_path / "reader.py").write_text("import sys\nsys.stdout.write(sys.stdin.read())\n")
    result = _run(blocks[0] + "\n" + blocks[1], tmp_path, sys.executable)
    assert result.returncode == 0, result.stderr
    assert "(1000, 8)" in result.stdout  # the first block's last print


@pytest.mark.slow
def test_parameter_server_training_block_under_fleetrun(tmp_path):
    result = _run(
        _blocks()[2],
        tmp_path,
        sys.executable,
        "-m",
        "fleet.launch",
        "--server_num=2",
        "--worker_num=2",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all 2 workers finished" in result.stdout + result.stderr


def test_data_parallel_block_after_the_first(tmp_path):
    blocks = _blocks()
    result = _run(blocks[0] + "\n" + blocks[3], tmp_path, sys.executable)
    assert result.returncode == 0, result.stderr
    # One loss per replica: the fetched [1]-shaped loss of each of the 2 replicas, concatenated.
    assert result.stdout.strip().splitlines()[-1].count("array(") == 1, result.stdout
