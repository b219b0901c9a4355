"""Tables and update rules of the parameter server on their own, without RPC."""

from __future__ import annotations

import os

import numpy as np
import pytest
from google.protobuf import json_format

from fleet import _core
from fleet.errors import InvalidArgument
from fleet.proto import ps_pb2
from fleet.ps import table_config
from fleet.testing.ps_reference import OPTIMIZERS, ReferenceRule

I64 = np.iinfo(np.int64)


def sparse_config(dim=4, optimizer="sgd", shards=4, min_count=0, seed=3, table_id=1):
    return table_config(
        {
            "table_id": table_id,
            "name": "emb",
            "type": "SPARSE",
            "dim": dim,
            "num_shards": shards,
            "optimizer": OPTIMIZERS[optimizer],
            "count_filter": {"min_count": min_count},
            "initializer": {"seed": seed, "uniform": {"low": -0.5, "high": 0.5}},
        }
    ).SerializeToString()


def sparse_table(**kwargs):
    return _core.ps.SparseTable(sparse_config(**kwargs))


def optimizer_bytes(name):
    return json_format.ParseDict(OPTIMIZERS[name], ps_pb2.OptimizerConfig()).SerializeToString()


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_update_rule_matches_numpy_reference(name):
    rule = _core.ps.UpdateRule(optimizer_bytes(name))
    ref = ReferenceRule(OPTIMIZERS[name])
    dim = 6
    assert rule.state_dim(dim) == ref.state_dim(dim)
    rng = np.random.default_rng(0)
    w = rng.standard_normal(dim).astype(np.float32)
    state = rule.init_state(dim)
    np.testing.assert_array_equal(state, ref.init_state(dim))
    w_ref, state_ref = w.copy(), ref.init_state(dim)
    for _ in range(5):
        g = rng.standard_normal(dim).astype(np.float32)
        rule.update(w, state, g)
        w_ref, state_ref = ref.update(w_ref, state_ref, g)
    np.testing.assert_allclose(w, w_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state, state_ref, rtol=1e-5, atol=1e-7)


def test_adam_declares_two_moments_and_two_powers():
    assert _core.ps.UpdateRule(optimizer_bytes("adam")).state_dim(8) == 2 * 8 + 2


@pytest.mark.parametrize(
    "optimizer",
    [
        {"learning_rate": 0.0, "sgd": {}},
        {"learning_rate": 0.1, "adam": {"beta1": 1.0}},
        {"learning_rate": 0.1},
    ],
)
def test_update_rule_rejects_bad_config(optimizer):
    raw = json_format.ParseDict(optimizer, ps_pb2.OptimizerConfig()).SerializeToString()
    with pytest.raises(InvalidArgument, match="optimizer"):
        _core.ps.UpdateRule(raw)


def test_stats_are_typed_objects_naming_the_table():
    table = sparse_table(table_id=5)
    table.pull(np.array([1, 2, 3], dtype=np.int64))
    stats = table.stats()
    assert isinstance(stats, _core.ps.TableStats)
    assert (stats.table_id, stats.type, stats.rows) == (5, "sparse", 3)
    assert stats.bytes > 0 and stats.filtered_keys == 0
    assert stats.ssd is None  # storage "memory"
    assert "table_id=5" in repr(stats) and "rows=3" in repr(stats)


def test_rows_are_created_lazily_over_the_whole_int64_range():
    table = sparse_table()
    keys = np.array([0, -1, 7, I64.min, I64.max, -(2**40)], dtype=np.int64)
    assert table.stats().rows == 0
    rows = table.pull(keys)
    assert rows.shape == (6, 4)
    assert np.all((rows >= -0.5) & (rows < 0.5)) and np.unique(rows[:, 0]).size == 6
    assert table.stats().rows == 6
    np.testing.assert_array_equal(table.pull(keys[::-1].copy()), rows[::-1])
    # The initial value is a function of (seed, key): shard count and pull order do not matter.
    other = sparse_table(shards=7)
    np.testing.assert_array_equal(other.pull(keys[::-1].copy())[::-1], rows)


@pytest.mark.parametrize("shards", [1, 7, 16])
def test_batched_lookup_with_repeats_new_keys_and_growth(shards):
    # One request of 60k keys in which a third are new and each new key occurs 2-3 times at
    # random places: the table grows (rehashes) while the request runs, and a repeat must find
    # the row its first occurrence created in the same request.
    rng = np.random.default_rng(5)
    old = rng.integers(I64.min, I64.max, 40_000, dtype=np.int64)
    new = rng.integers(I64.min, I64.max, 8_000, dtype=np.int64)
    table = sparse_table(shards=shards)
    table.pull(old)
    keys = rng.permutation(np.concatenate([old, new, new, new[:4_000]]))
    rows = table.pull(keys)
    assert table.stats().rows == old.size + new.size
    first = {}
    for k, r in zip(keys.tolist(), rows):
        np.testing.assert_array_equal(first.setdefault(k, r), r)
    # Same values as a table built key by key in another order and shard count.
    reference = sparse_table(shards=3)
    order = rng.permutation(keys.size)
    np.testing.assert_array_equal(reference.pull(keys[order]), rows[order])
    # Pushes with repeats of unseen keys apply every occurrence, in order (SGD: summed).
    unseen = rng.integers(I64.min, I64.max, 3_000, dtype=np.int64)
    push_keys = rng.permutation(np.concatenate([unseen, unseen, old[:3_000]]))
    table.push(push_keys, np.ones((push_keys.size, 4), np.float32))
    lr = OPTIMIZERS["sgd"]["learning_rate"]
    np.testing.assert_allclose(table.pull(unseen), reference.pull(unseen) - 2 * lr, atol=1e-6)
    np.testing.assert_allclose(table.pull(old[:3_000]), reference.pull(old[:3_000]) - lr, atol=1e-6)


def test_default_key_sharding_spreads_keys_evenly():
    keys = np.arange(300_000, dtype=np.int64)  # consecutive ids, as in a vocabulary
    for servers in (2, 3, 7):
        counts = np.bincount(_core.ps.hash_key_shard(keys, servers), minlength=servers)
        assert counts.size == servers
        assert np.abs(counts / (keys.size / servers) - 1).max() < 0.02, counts


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_sparse_push_applies_the_rule_per_row(name):
    table = sparse_table(optimizer=name, dim=3)
    ref = ReferenceRule(OPTIMIZERS[name])
    keys = np.array([4, -9, 4, 12], dtype=np.int64)  # key 4 twice: applied in order
    rows = {k: (table.pull(np.array([k]))[0], ref.init_state(3)) for k in (4, -9, 12)}
    rng = np.random.default_rng(1)
    for _ in range(3):
        grads = rng.standard_normal((4, 3)).astype(np.float32)
        table.push(keys, grads)
        for k, g in zip(keys, grads):
            rows[k] = ref.update(*rows[k], g)
    for k, (w, _) in rows.items():
        np.testing.assert_allclose(table.pull(np.array([k]))[0], w, rtol=1e-5, atol=1e-6)


def test_delta_push_adds_to_the_value_and_creates_rows():
    table = sparse_table(optimizer="adam")
    before = table.pull(np.array([1, 2]))
    delta = np.arange(8, dtype=np.float32).reshape(2, 4)
    table.push(np.array([1, 2]), delta, is_delta=True)
    np.testing.assert_allclose(table.pull(np.array([1, 2])), before + delta)
    table.push(np.array([99]), np.ones((1, 4), np.float32), is_delta=True)  # new row
    assert table.stats().rows == 3


def test_bad_pushes_are_rejected_and_change_nothing():
    table = sparse_table()
    keys = np.array([1, 2, 3])
    before = table.pull(keys)
    grads = np.ones((3, 4), np.float32)
    grads[2, 1] = np.nan
    with pytest.raises(InvalidArgument, match="NaN"):
        table.push(keys, grads)
    grads[2, 1] = np.inf
    with pytest.raises(InvalidArgument, match="NaN or infinity"):
        table.push(keys, grads)
    with pytest.raises(InvalidArgument, match="dim 4"):
        table.push(keys, np.ones((3, 5), np.float32))
    with pytest.raises(InvalidArgument, match="dtype"):
        table.push(keys, np.ones((3, 4), np.float64))
    np.testing.assert_array_equal(table.pull(keys), before)


def test_count_filter_admits_a_key_on_its_third_pull():
    table = sparse_table(min_count=3)
    key = np.array([42])
    for _ in range(2):
        np.testing.assert_array_equal(table.pull(key), np.zeros((1, 4), np.float32))
        table.push(key, np.ones((1, 4), np.float32))  # dropped: not admitted yet
    assert table.stats().rows == 0 and table.stats().filtered_keys == 1
    admitted = table.pull(key)
    np.testing.assert_array_equal(admitted, sparse_table().pull(key))  # fresh initial value
    assert table.stats().rows == 1 and table.stats().filtered_keys == 0


def filled_table(n=500, **kwargs):
    table = sparse_table(optimizer="adagrad", **kwargs)
    keys = np.random.default_rng(2).integers(I64.min, I64.max, n, dtype=np.int64)
    table.pull(keys)
    table.push(keys, np.ones((n, 4), np.float32))
    return table, keys


def test_save_and_load_on_other_server_counts(tmp_path):
    table, keys = filled_table()
    path = str(tmp_path / "part.base")
    assert table.save(path) == len(keys)
    assert not [f for f in os.listdir(tmp_path) if ".tmp-" in f]
    expected = table.pull(keys)
    pieces = [sparse_table(optimizer="adagrad") for _ in range(3)]
    loaded = [t.load([path], server_index=i, num_servers=3) for i, t in enumerate(pieces)]
    assert sum(loaded) == len(keys) and min(loaded) > 0
    owner = _core.ps.hash_key_shard(keys, 3)
    for i, piece in enumerate(pieces):
        mine = keys[owner == i]
        assert piece.stats().rows == mine.size
        np.testing.assert_array_equal(piece.pull(mine), expected[owner == i])
    # The optimizer state came along: one more identical push gives identical rows.
    whole = sparse_table(optimizer="adagrad")
    whole.load([path])
    for t in (table, whole):
        t.push(keys, np.ones((len(keys), 4), np.float32))
    np.testing.assert_array_equal(whole.pull(keys), table.pull(keys))


def test_rows_wider_than_the_write_buffer_save_and_load_whole(tmp_path):
    # 300k floats a row with Adagrad's state: 2.4 MB records against the writer's 1 MB buffer,
    # written between records that fit.
    dim = 300_000
    table = sparse_table(dim=dim, optimizer="adagrad", shards=1)
    keys = np.array([7, -3, 1 << 40], dtype=np.int64)
    table.push(keys, np.full((3, dim), 0.25, np.float32))
    path = str(tmp_path / "wide")
    assert table.save(path) == 3
    restored = sparse_table(dim=dim, optimizer="adagrad", shards=1)
    assert restored.load([path]) == 3
    np.testing.assert_array_equal(restored.pull(keys), table.pull(keys))


def test_delta_save_holds_only_changed_rows(tmp_path):
    table, keys = filled_table()
    table.save(str(tmp_path / "base"))
    changed = keys[:10]
    table.push(changed, np.ones((10, 4), np.float32))
    table.pull(np.array([123456789]))  # a new row counts as changed
    assert table.save(str(tmp_path / "delta"), delta=True) == 11
    assert table.save(str(tmp_path / "delta2"), delta=True) == 0
    restored = sparse_table(optimizer="adagrad")
    restored.load([str(tmp_path / "base"), str(tmp_path / "delta")])
    everything = np.concatenate([keys, [123456789]])
    np.testing.assert_array_equal(restored.pull(everything), table.pull(everything))


def test_load_rejects_damaged_or_foreign_files(tmp_path):
    table, _ = filled_table(n=50)
    path = tmp_path / "part"
    table.save(str(path))
    other_dim = _core.ps.SparseTable(sparse_config(dim=5, optimizer="adagrad"))
    with pytest.raises(InvalidArgument, match="expects dim 5"):
        other_dim.load([str(path)])
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))
    fresh = sparse_table(optimizer="adagrad")
    with pytest.raises(InvalidArgument, match="checksum"):
        fresh.load([str(path)])
    assert fresh.stats().rows == 0


def test_a_damaged_part_leaves_a_table_as_it_was(tmp_path):
    # Into an empty table a part is checked as its records load, and a damaged one empties the
    # table again; into a table holding rows it is checked whole first and nothing changes.
    table, keys = filled_table(n=300)
    base, delta = tmp_path / "base", tmp_path / "delta"
    table.save(str(base))
    table.push(keys[:20], np.ones((20, 4), np.float32))
    table.save(str(delta), delta=True)
    data = bytearray(delta.read_bytes())
    data[len(data) // 2] ^= 0x10
    delta.write_bytes(bytes(data))
    empty = sparse_table(optimizer="adagrad")
    with pytest.raises(InvalidArgument, match=f"{delta}: checksum mismatch.*'emb' is left empty"):
        empty.load([str(base), str(delta)])  # the base loads whole before the delta fails
    assert empty.stats().rows == 0
    holding = sparse_table(optimizer="adagrad")
    holding.push(keys[:5], np.ones((5, 4), np.float32))
    before = holding.pull(keys[:5])
    with pytest.raises(InvalidArgument, match=f"{delta}: checksum mismatch"):
        holding.load([str(base), str(delta)])
    assert holding.stats().rows == 5
    np.testing.assert_array_equal(holding.pull(keys[:5]), before)


def test_load_rejects_a_server_index_outside_the_server_count(tmp_path):
    table, _ = filled_table(n=10)
    table.save(str(tmp_path / "part"))
    for index, count in ((0, 0), (2, 2)):
        with pytest.raises(
            InvalidArgument, match=f"server_index must be in .*got {index} of {count}"
        ):
            sparse_table().load([str(tmp_path / "part")], server_index=index, num_servers=count)


def test_a_large_part_is_checked_in_halves_and_loaded_by_two_threads(tmp_path):
    # 86 MB: the checksum runs over two halves at once (64 MB and up), and 1.2M rows load in
    # two ranges at once (128k rows and up), whole or split over two servers. A flipped byte in
    # either half is caught.
    table = sparse_table(dim=16, shards=8)
    n = 1_200_000
    keys = (np.arange(n, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)).view(np.int64)
    values = table.pull(keys)
    path = tmp_path / "part"
    table.save(str(path))
    assert path.stat().st_size > 64 << 20
    loaded = sparse_table(dim=16, shards=8)
    assert loaded.load([str(path)]) == n
    np.testing.assert_array_equal(loaded.pull(keys), values)
    assert loaded.stats().rows == n
    # Into two servers: each thread keeps only this server's keys, and the halves add up.
    halves = [sparse_table(dim=16, shards=8) for _ in range(2)]
    counts = [t.load([str(path)], server_index=i, num_servers=2) for i, t in enumerate(halves)]
    assert sum(counts) == n and min(counts) > n // 3
    owner = _core.ps.hash_key_shard(keys, 2)
    for i, t in enumerate(halves):
        assert counts[i] == int((owner == i).sum())
        np.testing.assert_array_equal(t.pull(keys[owner == i]), values[owner == i])
    clean = path.read_bytes()
    for at in (len(clean) // 4, len(clean) * 3 // 4):
        data = bytearray(clean)
        data[at] ^= 0x01
        path.write_bytes(bytes(data))
        fresh = sparse_table(dim=16, shards=8)
        with pytest.raises(InvalidArgument, match="checksum"):
            fresh.load([str(path)])
        assert fresh.stats().rows == 0


def test_shrink_drops_rows_untouched_since_the_last_saves(tmp_path):
    table = sparse_table()
    table.pull(np.array([1, 2, 3]))
    table.save(str(tmp_path / "a"))
    table.push(np.array([1]), np.ones((1, 4), np.float32))
    assert table.shrink(1) == 0
    table.save(str(tmp_path / "b"))
    assert table.shrink(1) == 2  # keys 2 and 3: untouched for two saves
    assert table.stats().rows == 1
    np.testing.assert_array_equal(table.pull(np.array([1])).shape, (1, 4))


def test_rows_keep_their_values_across_grouped_slab_chunks_shrink_and_load(tmp_path):
    # One shard of 150k rows: past its first 16 chunks of 4096 rows the slab maps 16 chunks at a
    # time. A shrink to 10k rows returns the mappings beyond them; rows then grow again, and a
    # load maps all of its chunks at once.
    table = sparse_table(shards=1)
    n, kept = 150_000, 10_000
    keys = np.arange(n, dtype=np.int64) * 7919 - 10**12
    before = table.pull(keys)
    table.save(str(tmp_path / "a"))
    table.push(keys[:kept], np.ones((kept, 4), np.float32))
    touched = table.pull(keys[:kept])
    table.save(str(tmp_path / "b"))
    big = table.stats().bytes
    assert table.shrink(1) == n - kept
    assert table.stats().rows == kept
    assert table.stats().bytes < big / 4
    np.testing.assert_array_equal(table.pull(keys[:kept]), touched)
    more = np.arange(n, dtype=np.int64) * 7919 + 10**12
    fresh = table.pull(more)
    np.testing.assert_array_equal(table.pull(keys[:kept]), touched)
    np.testing.assert_array_equal(table.pull(more), fresh)
    table.save(str(tmp_path / "c"))
    loaded = sparse_table(shards=1)
    loaded.load([str(tmp_path / "c")])
    assert loaded.stats().rows == kept + n
    np.testing.assert_array_equal(loaded.pull(keys[:kept]), touched)
    np.testing.assert_array_equal(loaded.pull(more), fresh)
    assert not np.array_equal(before[:kept], touched)


def test_dense_blocks_are_spread_round_robin():
    config = table_config(
        {
            "table_id": 2,
            "type": "DENSE",
            "dim": 10,
            "dense_block_size": 4,
            "optimizer": OPTIMIZERS["sgd"],
            "initializer": {"seed": 1, "gaussian": {"std": 1.0}},
        }
    )
    whole = _core.ps.DenseTable(config.SerializeToString())
    parts = [_core.ps.DenseTable(config.SerializeToString(), i, 2) for i in range(2)]
    assert [p.local_size for p in parts] == [6, 4]  # blocks 0 and 2 | block 1
    full = whole.pull()
    np.testing.assert_array_equal(parts[0].pull(), np.concatenate([full[0:4], full[8:10]]))
    np.testing.assert_array_equal(parts[1].pull(), full[4:8])
    parts[1].push(np.ones(4, np.float32))
    np.testing.assert_allclose(parts[1].pull(), full[4:8] - 0.1)
    with pytest.raises(InvalidArgument, match="holds 6 floats"):
        parts[0].push(np.ones(4, np.float32))


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_dense_push_and_pull_returns_what_push_then_pull_returns(name):
    config = table_config(
        {
            "table_id": 2,
            "type": "DENSE",
            "dim": 1000,
            "dense_block_size": 256,
            "optimizer": OPTIMIZERS[name],
            "initializer": {"seed": 1, "gaussian": {"std": 1.0}},
        }
    ).SerializeToString()
    two_passes, one_pass = _core.ps.DenseTable(config, 1, 2), _core.ps.DenseTable(config, 1, 2)
    out = np.full(one_pass.local_size, np.nan, np.float32)
    rng = np.random.default_rng(4)
    for _ in range(3):
        grads = rng.standard_normal(one_pass.local_size).astype(np.float32)
        two_passes.push(grads)
        one_pass.push_and_pull(grads, out)
        np.testing.assert_array_equal(out, two_passes.pull())
    with pytest.raises(InvalidArgument, match="asked for 3 back"):
        one_pass.push_and_pull(grads, np.empty(3, np.float32))


def test_memory_per_row_stays_within_1_3x_of_key_and_floats():
    # One shard so that slab chunks round up once; benchmarks/ps_throughput.py measures the
    # process at 10 million rows.
    table = _core.ps.SparseTable(sparse_config(dim=8, optimizer="sgd", shards=1))
    n = 300_000
    keys = np.arange(-n // 2, n // 2, dtype=np.int64) * 7919
    table.pull(keys)
    stats = table.stats()
    assert stats.rows == n
    assert stats.bytes / n <= 1.3 * (8 + 4 * 8)


def overflow_table(action):
    config = ps_pb2.TableConfig.FromString(sparse_config(optimizer="adam"))
    config.overflow.action = action
    config.overflow.max_abs = 10.0
    return _core.ps.SparseTable(config.SerializeToString())


def test_delta_push_changes_the_value_alone_and_is_guarded_on_it():
    # A GEO delta is added to the value as it is, bit for bit, and leaves the rule's state as it
    # was: a gradient pushed afterwards moves the row as it moves a twin that saw no delta.
    keys = np.array([1, 2, 3], np.int64)
    rng = np.random.default_rng(11)
    delta = rng.standard_normal((3, 4)).astype(np.float32)
    grads = rng.standard_normal((3, 4)).astype(np.float32)
    table, twin = sparse_table(optimizer="adam"), sparse_table(optimizer="adam")
    before = table.pull(keys)
    np.testing.assert_array_equal(twin.pull(keys), before)
    table.push(keys, delta, is_delta=True)
    np.testing.assert_array_equal(table.pull(keys), before + delta)
    table.push(keys, grads)
    twin.push(keys, grads)
    np.testing.assert_allclose(table.pull(keys) - delta, twin.pull(keys), rtol=0, atol=1e-6)
    # The guard judges what a delta changes: past max_abs it is refused (that row left as it
    # was, the others applied) or clipped.
    refuse = overflow_table(ps_pb2.OverflowConfig.REFUSE)
    start = refuse.pull(keys)
    big = np.ones((3, 4), np.float32)
    big[1, 2] = 20.0
    with pytest.raises(InvalidArgument, match=r"sparse table 1 'emb': the update of key 2 would"):
        refuse.push(keys, big, is_delta=True)
    after = refuse.pull(keys)
    np.testing.assert_array_equal(after[1], start[1])
    np.testing.assert_array_equal(after[[0, 2]], start[[0, 2]] + 1)
    clip = overflow_table(ps_pb2.OverflowConfig.CLIP)
    start = clip.pull(keys)
    clip.push(keys, big, is_delta=True)
    expected = np.minimum(start + big, np.float32(10))
    np.testing.assert_array_equal(clip.pull(keys), expected)
