"""A checkpoint directory is one unit (csrc/ps/checkpoint.h): a save becomes visible only when
every server wrote its parts, a load refuses anything incomplete or mixed naming what is wrong,
and a failed or interrupted save leaves the previous checkpoint loadable. Real server processes
on 127.0.0.1."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from fleet.errors import FleetError, InvalidArgument, NotFound, Timeout, Unavailable
from fleet.ps.checkpoint import part_paths, read_manifest
from fleet.testing.ps_reference import OPTIMIZERS

pytestmark = pytest.mark.timeout(180)

SPARSE, DENSE = 1, 2
TABLES = [
    {
        "table_id": SPARSE,
        "name": "emb",
        "type": "SPARSE",
        "dim": 8,
        "optimizer": OPTIMIZERS["adagrad"],
        "initializer": {"seed": 9, "uniform": {"low": -1, "high": 1}},
    },
    {
        "table_id": DENSE,
        "name": "fc",
        "type": "DENSE",
        "dim": 300,
        "dense_block_size": 64,
        "optimizer": OPTIMIZERS["sgd"],
        "initializer": {"seed": 3, "gaussian": {"std": 1}},
    },
]
KEYS = np.arange(-400, 400, dtype=np.int64)


def train(client, keys=KEYS, seed=0):
    rng = np.random.default_rng(seed)
    client.pull_sparse(SPARSE, keys)
    client.push_sparse(SPARSE, keys, rng.standard_normal((keys.size, 8)).astype(np.float32))
    client.push_dense(DENSE, rng.standard_normal(300).astype(np.float32))


def snapshot(client, keys=KEYS):
    return client.pull_sparse(SPARSE, keys), client.pull_dense(DENSE)


def assert_same(a, b):
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def ps_dirs(dirname: Path):
    return sorted(p.name for p in dirname.iterdir() if p.name.startswith("ps-"))


def test_missing_part_is_refused_naming_it_and_nothing_loads(ps_servers, tmp_path):
    source = ps_servers(TABLES, 2, tag="src").client()
    train(source)
    source.save(tmp_path / "ckpt")
    missing = part_paths(tmp_path / "ckpt", SPARSE)[1]
    os.remove(missing)
    target = ps_servers(TABLES, 1, tag="dst").client()
    fresh = snapshot(target)
    with pytest.raises(NotFound, match=f"table 1.*part of server 1 of 2 {missing} is missing"):
        target.load(tmp_path / "ckpt")
    assert_same(snapshot(target), fresh)  # not even the dense table (complete) was loaded


def test_truncated_or_replaced_part_is_refused(ps_servers, tmp_path):
    client = ps_servers(TABLES, 2).client()
    train(client)
    client.save(tmp_path / "a")
    train(client, seed=1)
    client.save(tmp_path / "b")
    part_a, part_b = part_paths(tmp_path / "a", SPARSE)[0], part_paths(tmp_path / "b", SPARSE)[0]
    shutil.copy(part_a, part_b)  # same size (same rows), other content: a part of another save
    with pytest.raises(InvalidArgument, match=f"{part_b} has checksum .*\\(a part of another save"):
        client.load(tmp_path / "b")
    with open(part_a, "r+b") as f:
        f.truncate(os.path.getsize(part_a) - 40)
    with pytest.raises(InvalidArgument, match=f"{part_a} holds .* bytes, the manifest says"):
        client.load(tmp_path / "a")


def test_damaged_record_empties_every_sparse_table_a_fresh_server_was_restoring(
    ps_servers, tmp_path
):
    # Fresh servers check sparse parts as their records load (a pass over the files less); a
    # flipped byte deep in a later table's part still ends the load with the file named, with
    # every sparse table empty again (the earlier one had loaded whole) and no dense table
    # changed (they load last).
    tables = TABLES + [dict(TABLES[0], table_id=3, name="emb2", dim=4)]
    source = ps_servers(tables, 2, tag="src").client()
    train(source)
    source.push_sparse(3, KEYS, np.ones((KEYS.size, 4), np.float32))
    source.save(tmp_path / "ckpt")
    damaged = part_paths(tmp_path / "ckpt", 3)[1]
    with open(damaged, "r+b") as f:
        f.seek(os.path.getsize(damaged) - 100)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0x04]))
    target = ps_servers(tables, 1, tag="dst").client()
    fresh_dense = target.pull_dense(DENSE)
    with pytest.raises(
        InvalidArgument,
        match=f"{damaged}: checksum mismatch.*'emb2' is left empty; so is the other sparse table",
    ):
        target.load(tmp_path / "ckpt")
    rows = {t.table_id: t.rows for t in target.stats()[0] if t.table_id != DENSE}
    assert rows == {SPARSE: 0, 3: 0}
    np.testing.assert_array_equal(target.pull_dense(DENSE), fresh_dense)
    # A server whose tables hold rows checks every part before it changes any: rows stay.
    train(target)
    held = snapshot(target)
    with pytest.raises(InvalidArgument, match=f"{damaged}: checksum mismatch"):
        target.load(tmp_path / "ckpt")
    assert_same(snapshot(target), held)


def test_load_refuses_a_table_saved_with_another_dim(ps_servers, tmp_path):
    client = ps_servers(TABLES, 1, tag="eight").client()
    train(client)
    client.save(tmp_path / "ckpt")
    wider = [dict(TABLES[0], dim=16), TABLES[1]]
    other = ps_servers(wider, 1, tag="sixteen").client()
    with pytest.raises(
        InvalidArgument,
        match="table 1 was saved as sparse with dim 8; this "
        "server's table 1 'emb' is sparse with dim 16",
    ):
        other.load(tmp_path / "ckpt")


def test_no_manifest_and_empty_paths_are_errors(ps_servers, tmp_path):
    client = ps_servers(TABLES, 1).client()
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotFound, match="ps_manifest.json is missing"):
        client.load(tmp_path / "empty")
    with pytest.raises(InvalidArgument, match="Save: the checkpoint directory is empty"):
        client.save("")
    with pytest.raises(InvalidArgument, match="Load: the checkpoint directory is empty"):
        client.load("")


def test_save_on_other_server_count_replaces_the_old_parts(ps_servers, tmp_path):
    three = ps_servers(TABLES, 3, tag="three").client()
    train(three, seed=1)
    three.save(tmp_path / "ckpt")
    old_dirs = ps_dirs(tmp_path / "ckpt")
    two = ps_servers(TABLES, 2, tag="two").client()
    train(two, seed=2)
    two.save(tmp_path / "ckpt")
    new_dirs = ps_dirs(tmp_path / "ckpt")
    assert len(new_dirs) == 1 and new_dirs != old_dirs  # the 3-server parts are gone
    one = ps_servers(TABLES, 1, tag="one").client()
    assert one.load(tmp_path / "ckpt") == KEYS.size + 5  # 300 / 64 -> 5 dense blocks
    assert_same(snapshot(one), snapshot(two))


def test_delta_saves_into_one_directory_load_in_order(ps_servers, tmp_path):
    source = ps_servers(TABLES, 2, tag="src").client()
    train(source)
    assert source.save(tmp_path / "ckpt") == KEYS.size + 5
    train(source, KEYS[::7], seed=1)
    assert source.save(tmp_path / "ckpt", delta=True) == KEYS[::7].size + 5
    train(source, KEYS[::5], seed=2)
    source.save(tmp_path / "ckpt", delta=True)
    manifest = read_manifest(tmp_path / "ckpt")
    modes = {t.table_id: [s.mode for s in t.saves] for t in manifest.tables}
    assert modes == {SPARSE: [0, 1, 1], DENSE: [0]}  # dense tables always save every block
    assert len(ps_dirs(tmp_path / "ckpt")) == 3
    restored = ps_servers(TABLES, 3, tag="dst").client()
    restored.load(tmp_path / "ckpt")
    assert_same(snapshot(restored), snapshot(source))
    # A base save starts a new chain; the older saves' directories go.
    source.save(tmp_path / "ckpt")
    assert len(ps_dirs(tmp_path / "ckpt")) == 1


def test_server_killed_mid_save_keeps_the_previous_checkpoint(ps_servers, tmp_path):
    big = [dict(TABLES[0], dim=32), TABLES[1]]
    cluster = ps_servers(big, 2, tag="src")
    client = cluster.client(admin_timeout=60)
    keys = np.arange(20_000, dtype=np.int64)
    client.pull_sparse(SPARSE, keys)
    client.save(tmp_path / "ckpt")
    before = client.pull_sparse(SPARSE, keys)
    committed = ps_dirs(tmp_path / "ckpt")
    client.push_sparse(SPARSE, keys, np.ones((keys.size, 32), np.float32))
    client.pull_sparse(SPARSE, np.arange(20_000, 1_200_000, dtype=np.int64))  # ~80 MB a server

    errors = []
    saver = threading.Thread(target=lambda: errors.append(_save_error(client, tmp_path / "ckpt")))
    saver.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list(
        (tmp_path / "ckpt").glob("ps-*/table_1/part-1-of-2.base.tmp-*")
    ):
        time.sleep(0.001)
    cluster.procs[1].kill()
    saver.join(timeout=90)
    assert not saver.is_alive()
    (error,) = errors
    assert isinstance(error, (Unavailable, Timeout)), repr(error)
    assert f"Save to {tmp_path / 'ckpt'} on parameter server 1 at {cluster.endpoints[1]}" in str(
        error
    )
    leftovers = ps_dirs(tmp_path / "ckpt")
    assert len(leftovers) == 2 and committed[0] in leftovers

    # The previous checkpoint loads, without a row of the interrupted save.
    restart = ps_servers(big, 2, tag="restart").client()
    assert restart.load(tmp_path / "ckpt") == keys.size + 5
    np.testing.assert_array_equal(restart.pull_sparse(SPARSE, keys), before)
    # The next save removes what the interrupted one left.
    restart.save(tmp_path / "ckpt")
    assert len(ps_dirs(tmp_path / "ckpt")) == 1
    assert not list((tmp_path / "ckpt").rglob("*.tmp-*"))


def _save_error(client, dirname):
    try:
        client.save(dirname)
    except FleetError as e:
        return e
    return None


def test_full_disk_is_an_error_naming_server_and_path(ps_servers, tmp_path):
    cluster = ps_servers(TABLES, 2, tag="full", max_file_bytes=1 << 20)
    client = cluster.client()
    keys = np.arange(10, dtype=np.int64)
    client.pull_sparse(SPARSE, keys)
    client.save(tmp_path / "ckpt")  # small: fits
    client.pull_sparse(SPARSE, np.arange(100_000, dtype=np.int64))  # ~2.4 MB of parts in all
    with pytest.raises(
        FleetError,
        match=rf"Save to {tmp_path / 'ckpt'} on parameter server \d "
        rf"at 127.0.0.1:\d+: .*cannot write {tmp_path / 'ckpt'}"
        r"/ps-.*/table_1/part-\d-of-2.base.tmp-.*File too large",
    ):
        client.save(tmp_path / "ckpt")
    other = ps_servers(TABLES, 1, tag="dst").client()
    assert other.load(tmp_path / "ckpt") == keys.size + 5
