"""An export of a table's values (PsClient.save with end_save_cycle=False, what
fleet.save_inference_model does) does not count as a save: the next delta save still holds every
row changed since the last real save, and shrink's count of saves is unchanged. Checked against
a real save in the same place, which does both."""

from __future__ import annotations

import numpy as np
import pytest

from fleet.ps import PsClient, server_config, start_server

TABLE = {
    "table_id": 1,
    "type": "SPARSE",
    "dim": 2,
    "optimizer": {"learning_rate": 1.0, "sgd": {}},
    "initializer": {"zero": {}},
}


@pytest.fixture
def client():
    server = start_server(server_config(0, 1, [TABLE]))
    client = PsClient([server.endpoint])
    yield client
    client.close()
    server.shutdown(1.0)


def _push(client, keys):
    client.push_sparse(1, np.array(keys), np.ones((len(keys), 2), np.float32))


@pytest.mark.parametrize("export", [True, False])
def test_the_next_delta_holds_what_changed_since_the_last_real_save(client, tmp_path, export):
    ckpt = tmp_path / "ckpt"
    _push(client, [1, 2])
    assert client.save(ckpt) == 2  # base
    _push(client, [3])
    written = client.save(tmp_path / "export", 1, end_save_cycle=not export)
    assert written == 3  # an export holds every row
    # After an export the delta still holds row 3; after a real save nothing changed since.
    assert client.save(ckpt, delta=True) == (1 if export else 0)


@pytest.mark.parametrize("export", [True, False])
def test_shrink_does_not_count_an_export_as_a_save(client, tmp_path, export):
    _push(client, [1, 2])
    client.save(tmp_path / "ckpt")
    _push(client, [3])  # changed in the current save cycle
    client.save(tmp_path / "export", 1, end_save_cycle=not export)
    # Rows untouched since the previous save go: 1 and 2; row 3 too only if the write was a save.
    assert client.shrink(1, 0) == (2 if export else 3)
