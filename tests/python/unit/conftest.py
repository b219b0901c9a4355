"""Fixtures the parameter-server op tests share (test_ps_ops.py, test_ps_ops_slots.py)."""

from __future__ import annotations

import pytest

from fleet.ps import PsClient, server_config, start_server
from tests.python.unit.ps_ops_config import ps_ops_tables

PS_OPS_ROW_DIM = 3


@pytest.fixture
def cluster():
    """An in-process server on 127.0.0.1 with a sparse table 1 (rows of PS_OPS_ROW_DIM floats,
    SGD at rate 1, seeded uniform rows) and a dense table 0 (4 floats, SGD at 0.5, zeros), and a
    client of it; both are closed after the test."""
    tables = ps_ops_tables(PS_OPS_ROW_DIM)
    server = start_server(server_config(0, 1, tables))
    client = PsClient([server.endpoint])
    yield server, client
    client.close()
    server.shutdown(1.0)
