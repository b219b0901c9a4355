"""Fixtures that run parameter servers as real processes on 127.0.0.1 (free ports: each server
binds port 0 and reports the port it got). Every process started here is stopped when the test
ends: SIGTERM, then SIGKILL after a grace period (fleet/testing/ps_cluster.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Callable, List, Optional, Sequence

import pytest

from fleet.testing.ps_cluster import PsCluster, start_servers

REPO_ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def ps_servers(tmp_path: Path) -> Callable[..., PsCluster]:
    """``ps_servers(tables, num_servers=1, tag="ps", max_file_bytes=None) -> PsCluster``; all
    stopped at teardown."""
    clusters: List[PsCluster] = []

    def start(
        tables: Sequence[dict],
        num_servers: int = 1,
        tag: str = "ps",
        max_file_bytes: Optional[int] = None,
    ) -> PsCluster:
        cluster = start_servers(tmp_path, tables, num_servers, tag, max_file_bytes)
        clusters.append(cluster)
        return cluster

    yield start
    for cluster in clusters:
        cluster.stop()


@pytest.fixture(scope="session")
def criteo_200k(tmp_path_factory) -> tuple[list[str], str]:
    """(training files, test file): 200k rows in 2 parts and 50k test rows of Criteo-format data
    generated from the planted model (seed 0, as the main job), once per test process."""
    out = tmp_path_factory.mktemp("criteo_200k")
    subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "examples" / "ctr_dnn" / "generate_data.py"),
            "--out",
            str(out),
            "--train_rows",
            "200000",
            "--test_rows",
            "50000",
            "--train_parts",
            "2",
            "--seed",
            "0",
        ],
        check=True,
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
        capture_output=True,
        timeout=300,
    )
    return sorted(str(p) for p in out.glob("train*")), str(out / "test.txt")
