"""CTR-DNN on parameter servers through fleetrun (examples/ctr_dnn/train_ps.py), against the
single-process run on the same generated data: every mode reaches the single-process test AUC
(sync: 2 workers x batch 256 against one process at batch 512, the same updates), both drivers
work, and the job prints its totals."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.python.e2e import example_jobs as ej

EXAMPLE = ej.ROOT / "examples" / "ctr_dnn"
# Every mode but GEO runs 2 workers x batch 256: a round of both workers' updates covers the
# 512 rows of one single-process step, as sync's equivalence needs. Measured on this data (200k
# rows, 1 epoch, Adam 1e-3; single process 0.7723; the model alone, over seeds 1-5:
# 0.7688-0.7742): sync 0.7727; async 0.7699-0.7725 over 10 runs, 6 of them beside one or two
# other jobs (at batch 512 per worker: 0.7686-0.7703, and once in CI 0.7672, a gap of 0.0051);
# half-async 0.7675-0.7725 over 11 runs, in two groups like the seeds (about 0.7715 and about
# 0.768), so a bound of 0.005 would fail roughly one run in ten beside other jobs, hence 0.008;
# geo 0.7709; async without the staleness bound 0.754-0.762 (its dense values lag a few steps;
# see async_communicator.h).
TOLERANCE = {
    "sync": 0.002,
    "half_async": 0.008,
    "geo": 0.005,
    # Async's test AUC moves with the timing of its sparse pushes: within 0.0024 of one process
    # over 10 runs beside other jobs, but one CI run on 2 loaded cores ended 0.0057 below (with
    # the dense floats through shared memory, the default since 532770e). The benchmark's
    # async_auc_gap (quiet machine, the 0.005) is the figure for quality; this test
    # checks that async learns as one process does.
    "async": 0.008,
    "async_unbounded": 0.03,
}


@pytest.fixture(scope="module")
def criteo(criteo_200k):
    train, test = criteo_200k
    single = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE / "train.py"),
            "--train",
            *train,
            "--test",
            test,
            "--print_period",
            "100000",
        ],
        env=ej.env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return train, test, ej.value(single.stdout, "test_auc")


def _fleetrun(train, test, *args: str, servers: int = 1) -> str:
    return ej.fleetrun(EXAMPLE / "train_ps.py", train, test, *args, servers=servers)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sync", "async", "async_unbounded", "half_async", "geo"])
def test_every_mode_reaches_the_single_process_auc(criteo, mode):
    train, test, single_auc = criteo
    args = ["--mode", mode.removesuffix("_unbounded")]
    if mode != "geo":
        args += ["--batch_size", "256"]  # 2 workers x 256 = one process's batch of 512
    if mode.startswith("async"):
        # At most one gradient waiting per table: staleness stays bounded however slow the
        # send threads are on a loaded machine (with 4, runs beside other jobs lost 0.04-0.07).
        args += ["--send_queue_size", "1"]
    if mode == "async_unbounded":
        args += ["--max_dense_staleness", "-1"]
    out = _fleetrun(train, test, *args, servers=2 if mode in ("sync", "geo") else 1)
    auc = ej.value(out, "test_auc")
    assert ej.value(out, "total_samples") >= 199_000
    assert ej.value(out, "total_samples_per_sec") > 0
    assert abs(auc - single_auc) <= TOLERANCE[mode], (mode, auc, single_auc)
    # test_auc is fleet.metrics.auc over the workers' histograms of their shares of the test
    # set: the AUC of all their predictions pooled.
    assert abs(auc - ej.value(out, "pooled_auc")) < 1e-6


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_train_from_dataset_with_two_threads_per_worker(criteo, mode, tmp_path):
    train, test, _ = criteo
    # A slice (the pipe_command reader is Python): each worker reads one 10k-row file.
    parts = []
    for i, path in enumerate(train):
        part = tmp_path / f"part-{i}"
        with open(path) as src, open(part, "w") as dst:
            for n, line in enumerate(src):
                if n == 10_000:
                    break
                dst.write(line)
        parts.append(str(part))
    out = _fleetrun(parts, test, "--mode", mode, "--dataset", "queue", "--thread", "2")
    assert ej.value(out, "total_samples") == 20_000
    # 20k rows, an effective batch of 4 x 512 in sync: far from converged, but trained.
    assert ej.value(out, "test_auc") > 0.62


@pytest.mark.slow
def test_days_save_a_base_then_deltas_and_a_job_resumes_from_them(criteo, tmp_path):
    train, test, _ = criteo
    from fleet.ps.checkpoint import read_manifest

    ckpt = tmp_path / "ckpt"
    common = ["--mode", "async", "--max_batches", "30", "--save_dir", str(ckpt)]
    out = _fleetrun(train, test, "--days", "2", *common)
    assert "saved base checkpoint of day 1" in out and "saved delta checkpoint of day 2" in out
    manifest = read_manifest(str(ckpt))
    sparse = [t for t in manifest.tables if t.type == 1]
    assert sparse and [s.mode for s in sparse[0].saves] == [0, 1]  # base, then the delta
    base_rows = sum(f.rows for f in sparse[0].saves[0].files)
    delta_rows = sum(f.rows for f in sparse[0].saves[1].files)
    assert 0 < delta_rows < base_rows
    # A job started from the chain serves base + delta and trains on (a third day).
    out = _fleetrun(train, test, "--resume", str(ckpt), "--epochs", "1", *common)
    assert ej.value(out, "test_auc") > 0.6
