"""Fixtures that run parameter servers as real processes on 127.0.0.1 (free ports: each server
binds port 0 and reports the port it got). Every process started here is stopped when the test
ends: SIGTERM, then SIGKILL after a grace period (fleet/testing/ps_cluster.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, List, Optional, Sequence

import pytest

from fleet.testing.ps_cluster import PsCluster, start_servers


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
