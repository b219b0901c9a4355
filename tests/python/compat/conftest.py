"""Data of the porting suite: Criteo-format rows from the repository's generator (a planted
model, so that "learns" has a meaning), made once per test process."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.python.compat.jobs import REPO_ROOT, job_env


@pytest.fixture(scope="session")
def criteo_small(tmp_path_factory) -> dict[str, object]:
    """{"train": [2 part files, 12k rows], "test": file of 4k rows}."""
    out = tmp_path_factory.mktemp("criteo_small")
    subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "examples" / "ctr_dnn" / "generate_data.py"),
            "--out",
            str(out),
            "--train_rows",
            "12000",
            "--test_rows",
            "4000",
            "--train_parts",
            "2",
            "--seed",
            "0",
        ],
        check=True,
        env=job_env(out),
        capture_output=True,
        timeout=300,
    )
    return {"train": sorted(str(p) for p in out.glob("train*")), "test": str(out / "test.txt")}
