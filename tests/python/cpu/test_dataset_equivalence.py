"""QueueDataset and InMemoryDataset over the same files feed the same samples: every sample
exactly once per pass, whatever the reader, producer and trainer thread counts, before and after
local and global shuffles. A program op (scale) runs on every batch in every trainer thread."""

import threading

import numpy as np
import pytest

import fleet
from fleet import layers
from fleet.dataset import DatasetFactory

FILES, LINES = 6, 400


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Six MultiSlot files: ids (1..4 int64 per sample), dense (3 floats), label (0/1).
    Files 0-2 have label 0, files 3-5 label 1 (the global shuffle test uses that)."""
    rng = np.random.default_rng(7)
    root = tmp_path_factory.mktemp("multislot")
    paths, totals = [], {"samples": 0, "ids": 0, "ids_count": 0, "dense": 0.0, "label": 0}
    for f in range(FILES):
        lines = []
        for _ in range(LINES):
            ids = rng.integers(0, 10**6, size=rng.integers(1, 5))
            dense = rng.standard_normal(3).astype(np.float32)
            label = int(f >= FILES // 2)
            lines.append(
                " ".join([str(len(ids)), *map(str, ids), "3", *map(str, dense), "1", str(label)])
            )
            totals["ids"] += int(ids.sum())
            totals["ids_count"] += len(ids)
            totals["dense"] += float(dense.astype(np.float64).sum())
            totals["label"] += label
            totals["samples"] += 1
        path = root / f"part-{f:05d}"
        path.write_text("\n".join(lines) + "\n")
        paths.append(str(path))
    return paths, totals


def _program():
    main = fleet.Program()
    with fleet.program_guard(main, fleet.Program()):
        ids = layers.data("ids", [1], dtype="int64", lod_level=1)
        dense = layers.data("dense", [3])
        label = layers.data("label", [1], dtype="int64")
        doubled = layers.scale(dense, 2.0)
    return main, [ids, dense, label], doubled


def _dataset(kind, files, use_vars, batch_size=64, threads=2):
    ds = DatasetFactory().create_dataset(kind)
    ds.set_use_var(use_vars)
    ds.set_batch_size(batch_size)
    ds.set_thread(threads)
    ds.set_filelist(files)
    return ds


def _train(main, dataset, doubled, threads):
    return fleet.Executor().train_from_dataset(
        main,
        dataset,
        scope=fleet._core.Scope(),
        thread=threads,
        fetch_list=["ids", "dense", "label", doubled],
        print_period=0,
    )


def _check_totals(run, totals, doubled, samples=None):
    assert run.samples == (samples if samples is not None else totals["samples"])
    assert run.fetch_sums["ids"] == totals["ids"]
    assert run.fetch_sums["label"] == totals["label"]
    np.testing.assert_allclose(run.fetch_sums["dense"], totals["dense"], rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(
        run.fetch_sums[doubled.name], 2 * totals["dense"], rtol=1e-5, atol=1e-3
    )


@pytest.mark.parametrize("readers,trainers", [(1, 1), (3, 2), (8, 4)])
def test_queue_dataset_feeds_every_sample_once(data, readers, trainers):
    files, totals = data
    main, use_vars, doubled = _program()
    run = _train(
        main, _dataset("QueueDataset", files, use_vars, threads=readers), doubled, trainers
    )
    _check_totals(run, totals, doubled)
    full, partial = divmod(totals["samples"], 64)
    # Each reader thread may end with one partial batch.
    assert full + (partial > 0) <= run.batches <= full + min(readers, FILES)


@pytest.mark.parametrize("load_threads,trainers", [(1, 1), (3, 2)])
def test_in_memory_dataset_matches_queue_dataset(data, load_threads, trainers):
    files, totals = data
    main, use_vars, doubled = _program()
    queue = _train(main, _dataset("QueueDataset", files, use_vars), doubled, trainers)
    memory = _dataset("InMemoryDataset", files, use_vars, threads=load_threads)
    memory.load_into_memory()
    assert memory.get_memory_data_size() == totals["samples"]
    assert memory.load_stats["lines"] == totals["samples"]
    for _ in range(2):  # memory survives a pass
        run = _train(main, memory, doubled, trainers)
        assert run.batches == -(-totals["samples"] // 64)
        assert (run.samples, run.fetch_sums["label"]) == (queue.samples, queue.fetch_sums["label"])
        _check_totals(run, totals, doubled)
    memory.local_shuffle(seed=3)
    _check_totals(_train(main, memory, doubled, trainers), totals, doubled)


def test_local_shuffle_is_reproducible_and_moves_samples(data):
    files, _ = data
    main, use_vars, doubled = _program()

    def last_batch_ids(seed):
        ds = _dataset("InMemoryDataset", files, use_vars, threads=2)
        ds.load_into_memory()
        if seed is not None:
            ds.local_shuffle(seed=seed)
        ds.set_thread(1)  # one producer: batches arrive in order
        return _train(main, ds, doubled, 1).fetch["ids"][:, 0]

    unshuffled = last_batch_ids(None)
    np.testing.assert_array_equal(unshuffled, last_batch_ids(None))  # file order, any readers
    np.testing.assert_array_equal(last_batch_ids(11), last_batch_ids(11))
    assert not np.array_equal(last_batch_ids(11), last_batch_ids(12))
    assert not np.array_equal(last_batch_ids(11), unshuffled)


def test_local_global_shuffle_keeps_every_sample(data):
    files, totals = data
    main, use_vars, doubled = _program()
    ds = _dataset("InMemoryDataset", files, use_vars)
    ds.load_into_memory()
    ds.global_shuffle(seed=5)  # no fleet: one worker
    assert ds.get_memory_data_size() == totals["samples"]
    _check_totals(_train(main, ds, doubled, 2), totals, doubled)


class ThreadExchange:
    """An all-to-all of bytes between ranks that are threads of this process."""

    def __init__(self, world_size):
        self.boxes = [[b""] * world_size for _ in range(world_size)]
        self.barrier = threading.Barrier(world_size)

    def for_rank(self, rank):
        def exchange(payloads):
            for dst, payload in enumerate(payloads):
                self.boxes[dst][rank] = payload
            self.barrier.wait(timeout=60)
            received = list(self.boxes[rank])
            self.barrier.wait(timeout=60)
            return received

        return exchange


def test_global_shuffle_between_two_workers_exchanges_samples(data):
    files, totals = data
    main, use_vars, doubled = _program()
    # Worker 0 holds the label-0 files, worker 1 the label-1 files.
    workers = [
        _dataset("InMemoryDataset", files[:3], use_vars),
        _dataset("InMemoryDataset", files[3:], use_vars),
    ]
    for ds in workers:
        ds.load_into_memory()
    exchange, failures = ThreadExchange(2), []

    def shuffle(rank):
        try:
            workers[rank].global_shuffle(
                exchange=exchange.for_rank(rank), rank=rank, world_size=2, seed=100 + rank
            )
        except Exception as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=shuffle, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not failures, failures
    runs = [_train(main, ds, doubled, 2) for ds in workers]
    assert sum(r.samples for r in runs) == totals["samples"]
    assert sum(r.fetch_sums["ids"] for r in runs) == totals["ids"]
    assert sum(r.fetch_sums["label"] for r in runs) == totals["label"]
    for r in runs:  # both workers now hold samples of both labels
        assert 0 < r.fetch_sums["label"] < r.samples


def test_release_memory(data):
    files, _ = data
    main, use_vars, doubled = _program()
    ds = _dataset("InMemoryDataset", files[:1], use_vars)
    ds.load_into_memory()
    assert ds.get_memory_data_size() == LINES and ds.get_memory_bytes() > 0
    ds.release_memory()
    assert ds.get_memory_data_size() == 0
    with pytest.raises(fleet.errors.InvalidArgument, match="load_into_memory"):
        _train(main, ds, doubled, 1)


def test_preload_into_memory(data):
    files, totals = data
    main, use_vars, doubled = _program()
    ds = _dataset("InMemoryDataset", files, use_vars)
    ds.preload_into_memory(thread_num=2)
    ds.wait_preload_done()
    _check_totals(_train(main, ds, doubled, 2), totals, doubled)


def test_progress_lines_show_fetches_and_speed(data, capsys):
    files, _ = data
    main, use_vars, doubled = _program()
    ds = _dataset("QueueDataset", files[:2], use_vars, batch_size=50)
    fleet.Executor().train_from_dataset(
        main,
        ds,
        scope=fleet._core.Scope(),
        thread=2,
        fetch_list=["label", doubled],
        fetch_info=["lab", "twice"],
        print_period=4,
        debug=True,
    )
    out = capsys.readouterr().out.splitlines()
    progress = [line for line in out if line.startswith("batch ")]
    assert len(progress) == 4  # 800 samples / 50 = 16 batches, every 4th reported
    assert all("lab=" in line and "twice=" in line and "samples/s" in line for line in progress)
    assert any(line.startswith("op time over all threads") for line in out)
