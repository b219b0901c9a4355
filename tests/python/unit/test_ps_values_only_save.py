"""save_persistables(mode=2) / PsClient.save(values_only=True): sparse rows without their
update-rule state. The parts are smaller; a load restores the values exactly and starts the
state afresh (checked by the next Adagrad step, whose size depends on the accumulator); the save
starts a chain that delta saves extend; and a save cannot be both delta and values-only."""

from __future__ import annotations

import numpy as np
import pytest

from fleet.errors import InvalidArgument
from fleet.ps import PsClient, server_config, start_server
from fleet.ps.checkpoint import read_manifest

DIM, LR = 4, 0.1
TABLE = {
    "table_id": 1,
    "type": "SPARSE",
    "dim": DIM,
    "optimizer": {"learning_rate": LR, "adagrad": {}},
    "initializer": {"zero": {}},
}
KEYS = np.array([1, -5, 2**40])


@pytest.fixture
def servers():
    started = []

    def start():
        server = start_server(server_config(0, 1, [TABLE]))
        client = PsClient([server.endpoint])
        started.append((server, client))
        return client

    yield start
    for server, client in started:
        client.close()
        server.shutdown(1.0)


def _push_ones(client):
    client.push_sparse(1, KEYS, np.ones((KEYS.size, DIM), np.float32))


def _part_bytes(dirname) -> int:
    return sum(f.bytes for f in read_manifest(str(dirname)).tables[0].saves[0].files)


def test_values_only_restores_values_and_restarts_the_state(servers, tmp_path):
    trained = servers()
    _push_ones(trained)  # Adagrad accumulator 1 per value
    trained.save(tmp_path / "base")
    trained.save(tmp_path / "values", values_only=True)
    # A 72-byte header, then records: key + dim values + dim accumulators, or key + dim values.
    assert _part_bytes(tmp_path / "base") == 72 + KEYS.size * (8 + 4 * 2 * DIM)
    assert _part_bytes(tmp_path / "values") == 72 + KEYS.size * (8 + 4 * DIM)
    resumed = servers()
    assert resumed.load(tmp_path / "values") == KEYS.size
    before = trained.pull_sparse(1, KEYS)
    np.testing.assert_array_equal(resumed.pull_sparse(1, KEYS), before)
    # The next step: the trained table's accumulator is 2 (step lr / sqrt 2), the resumed one's
    # starts afresh at 1 (step lr).
    _push_ones(trained)
    _push_ones(resumed)
    np.testing.assert_allclose(before - trained.pull_sparse(1, KEYS), LR / np.sqrt(2), rtol=1e-4)
    np.testing.assert_allclose(before - resumed.pull_sparse(1, KEYS), LR, rtol=1e-4)


def test_a_delta_save_extends_a_values_only_chain(servers, tmp_path):
    client = servers()
    _push_ones(client)
    client.save(tmp_path / "ckpt", values_only=True)
    client.push_sparse(1, np.array([77]), np.ones((1, DIM), np.float32))
    assert client.save(tmp_path / "ckpt", delta=True) == 1
    modes = [s.mode for s in read_manifest(str(tmp_path / "ckpt")).tables[0].saves]
    assert modes == [2, 1]  # VALUES, then DELTA
    resumed = servers()
    assert resumed.load(tmp_path / "ckpt") == KEYS.size + 1
    keys = np.append(KEYS, 77)
    np.testing.assert_array_equal(resumed.pull_sparse(1, keys), client.pull_sparse(1, keys))


def test_a_save_is_not_both_delta_and_values_only(servers, tmp_path):
    with pytest.raises(InvalidArgument, match="delta or values-only, not both"):
        servers().save(tmp_path / "ckpt", delta=True, values_only=True)


@pytest.mark.parametrize("values_only", [False, True])
def test_a_load_of_many_blocks_restores_every_row(servers, tmp_path, values_only):
    """More rows than one read block (8192) of the load, spread over every shard."""
    rng = np.random.default_rng(0)
    keys = np.unique(rng.integers(-(2**62), 2**62, size=30_000))
    trained = servers()
    trained.push_sparse(1, keys, rng.standard_normal((keys.size, DIM)).astype(np.float32))
    trained.save(tmp_path / "ckpt", values_only=values_only)
    resumed = servers()
    assert resumed.load(tmp_path / "ckpt") == keys.size
    np.testing.assert_array_equal(resumed.pull_sparse(1, keys), trained.pull_sparse(1, keys))
