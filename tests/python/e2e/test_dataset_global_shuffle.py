"""InMemoryDataset.global_shuffle(fleet) across two worker processes launched by fleetrun: the
samples move between workers over the workers' Gloo group and none is lost or duplicated."""

from __future__ import annotations

import pytest

from tests.python.e2e import launch_helpers as lh

pytestmark = pytest.mark.timeout(120)

ROWS = 200  # per worker; worker 0's rows all have label 0, worker 1's label 1

SHUFFLE = f"""
import fleet as fl  # the package; `fleet` here is the facade, as in Paddle scripts
from fleet import layers
r = fleet.worker_index()
path = os.path.join(os.environ["FLEET_TEST_JOB_DIR"], f"part-{{r}}")
with open(path, "w") as f:
    f.writelines(f"1 {{r * 1000 + i}} 1 {{r}}\\n" for i in range({ROWS}))
main = fl.Program()
with fl.program_guard(main, fl.Program()):
    ids = layers.data("ids", [1], dtype="int64", lod_level=1)
    label = layers.data("label", [1], dtype="int64")
    positives = layers.reduce_sum(layers.cast(label, "float32"))
dataset = fl.DatasetFactory().create_dataset("InMemoryDataset")
dataset.set_use_var([ids, label])
dataset.set_batch_size(16)
dataset.set_filelist([path])
dataset.load_into_memory()
before = dataset.get_memory_data_size()
dataset.global_shuffle(fleet, seed=7)
result = fl.Executor().train_from_dataset(main, dataset, thread=1, fetch_list=[positives],
                                          print_period=0)
record("shuffle", dict(before=before, after=dataset.get_memory_data_size(),
                       samples=result.samples, positives=result.fetch_sums[positives.name]))
fleet.barrier_worker()
"""


def test_global_shuffle_moves_samples_between_two_workers(tmp_path):
    result = lh.run_job(
        tmp_path,
        ["--collective", "--nproc_per_node=2"],
        SHUFFLE,
        collective=True,
        FLEET_TEST_JOB_DIR=str(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    seen = lh.recorded(tmp_path, "shuffle")
    assert sorted(seen) == ["worker.0", "worker.1"]
    assert all(out["before"] == ROWS for out in seen.values())
    assert sum(out["after"] for out in seen.values()) == 2 * ROWS
    assert sum(out["positives"] for out in seen.values()) == ROWS
    for name, out in seen.items():
        assert out["samples"] == out["after"]
        # Each worker now holds rows of both origins (a seeded draw: about half of each).
        assert 0 < out["positives"] < out["after"], (name, out)
