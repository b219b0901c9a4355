"""Benchmark: one-process data parallelism (CompiledProgram.with_data_parallel, CPU_NUM=2)
against one trainer thread on the same data, and against Hogwild train_from_dataset(thread=2).

    .venv/bin/python benchmarks/data_parallel.py [--quick] [--rounds N] [--plain_reduction]
                                                 [--whole_sparse_updates] [--whole_dense_updates]
                                                 [--reader_threads N] [--spin_us N]
                                                 [--uneven_barrier_work]
                                                 [--unshared_barrier_work]
                                                 [--late_barrier_work]
                                                 [--weight_products]

Two models, each trained for one pass over the same in-memory dataset by three runs that start
from the same parameters:
  one_thread   train_from_dataset(main, thread=1), batch 2B: the data-parallel step's global
               batch, so both train with the same updates (as many steps, of the same samples)
  data_parallel train_from_dataset(CompiledProgram(main).with_data_parallel(places=2)), one batch
               of B a replica per step (synchronous: 2B samples a step, the gradient their mean)
  hogwild      train_from_dataset(main, thread=2), batch B a thread (lock-free updates of shared
               parameters, Fleet's default multi-thread training: the same work a thread as a
               replica, twice as many updates as the other two)
  data_parallel_plain  (with --plain_reduction) data_parallel with
               BuildStrategy.overlap_reduction = False: every gradient reduced after the
               backward pass instead of during it (the same parameters, bit for bit)
  data_parallel_whole_sparse  (with --whole_sparse_updates) data_parallel with
               BuildStrategy.split_sparse_updates = False: an is_sparse table reduced and
               updated by one replica instead of split by rows over both (the same parameters,
               bit for bit; only CTR-DNN has such a table)
  data_parallel_whole_dense  (with --whole_dense_updates) data_parallel with
               BuildStrategy.split_dense_updates = False: CTR-DNN's unbalanced dense gradients
               (269k against 161k elements) kept whole, cut into ranges after the backward pass,
               instead of its first layer's split by rows, which balances them and moves the
               reduction into the backward pass (the same parameters, bit for bit; the MLP's are
               balanced, so it has no split)
  data_parallel_uneven  (with --uneven_barrier_work) data_parallel with
               BuildStrategy.even_barrier_work = False: every gradient reduced as soon as both
               replicas are past it, instead of the replica with less work after the barrier
               that ends the backward pass keeping its last reductions for after it (the MLP:
               the owner of fc_0.w_0 reduces it there alone; the same parameters, bit for bit;
               CTR-DNN's work after the barrier is already even, so there it is a noise control)
  data_parallel_unshared  (with --unshared_barrier_work) data_parallel with
               BuildStrategy.share_barrier_work = False: each replica does its own work after the
               barrier that ends the backward pass (its last reductions and its parameters'
               updates) and then waits at the step's end for the other, instead of taking the
               other's tasks that have not started (the same parameters, bit for bit)
  data_parallel_late  (with --late_barrier_work) data_parallel with
               BuildStrategy.early_barrier_work = False: a replica that finishes its backward
               pass first waits idle at the barrier for the other, instead of running its own
               tasks of the work after it meanwhile, each once both replicas are past the last
               op touching what it touches (the same parameters, bit for bit)
  data_parallel_weight_products  (with --weight_products) data_parallel with
               BuildStrategy.split_weight_gradients = True: instead of each replica computing
               the fc weights' gradients on its half batch in its backward pass and the two
               being summed, each replica computes half of every weight gradient's rows over
               the whole batch after the backward passes (no sum, one zeroing of each, but each
               replica packs both replicas' output gradients; the parameters agree to rounding)
  data_parallel_spin  (with --spin_us N) data_parallel with FLEET_DP_SPIN_US=N: each replica
               waiting for another polls N us before it sleeps, instead of the default 50 (or
               the FLEET_DP_SPIN_US the benchmark was started with; the same parameters, bit for
               bit: only the waits change)
Models: CTR-DNN (examples/ctr_dnn: 26 sparse slots into a 1M x 10 is_sparse embedding, fc
400-400-400, lazy Adam, B=512) on generated Criteo-format data, and the collective benchmark's
MLP (4 fc layers of 1024, sigmoid cross-entropy, SGD 0.05, B=256) on data from a planted teacher.

The three runs take turns for --rounds rounds (the order rotates each round) and each reports
its median samples/s. Reading is not measured (the datasets are loaded into memory first);
--reader_threads producer threads gather the batches from memory during the runs. The default
is one: the batches then come in file order, so one_thread and data_parallel train on the same
batches (and reach the same AUC, bit for bit), and a gather (about 50 us a CTR-DNN batch of 512)
keeps well ahead of the trainers. With two, the producers fill the batch channel in an order
timing decides, and the runs' AUCs differ by data order.
Each process uses one BLAS thread a trainer thread. The load average before and after every
round is recorded: the machine may be shared, and figures from a loaded machine are noise.

Figures (the last line of output is one JSON object), per model:
  scaling_vs_one_thread   data_parallel samples/s / one_thread samples/s (physical limit: the
                          number of replicas, 2; target >= 1.8 on 2 idle cores)
  hogwild_vs_one_thread   hogwild samples/s / one_thread samples/s, the peer
  data_parallel_vs_hogwild  data_parallel samples/s / hogwild samples/s: Hogwild's threads
                          never wait for each other, and run the replicas' half batches (so
                          OpenBLAS packs each weight as often), so this is about the share of
                          the scaling two unsynchronised threads reach on this machine that
                          the replicas keep
  overlap_gain            (with --plain_reduction) data_parallel samples/s /
                          data_parallel_plain samples/s
  split_gain              (with --whole_sparse_updates) data_parallel samples/s /
                          data_parallel_whole_sparse samples/s
  dense_split_gain        (with --whole_dense_updates) data_parallel samples/s /
                          data_parallel_whole_dense samples/s (the MLP's: a noise control)
  barrier_evening_gain    (with --uneven_barrier_work) data_parallel samples/s /
                          data_parallel_uneven samples/s
  barrier_sharing_gain    (with --unshared_barrier_work) data_parallel samples/s /
                          data_parallel_unshared samples/s
  shared_barrier_tasks_per_step  per data-parallel run: tasks of the work after the barrier
                          that a replica ran for the other, per step, median of each run
                          (BuildStrategy.share_barrier_work; 0 when off)
  early_barrier_tasks_per_step  per data-parallel run: tasks of that work a replica ran while it
                          waited at the barrier for the other, per step, median of each run
                          (BuildStrategy.early_barrier_work; 0 when off)
  barrier_early_gain      (with --late_barrier_work) data_parallel samples/s /
                          data_parallel_late samples/s
  deferred_reductions     per data-parallel run: the gradients whose reduction a replica
                          keeps until after the barrier, every step
                          (BuildStrategy.even_barrier_work)
  weight_product_gain     (with --weight_products) data_parallel_weight_products samples/s /
                          data_parallel samples/s (above 1: computing the weight gradients
                          by rows beats summing them)
  spin_gain               (with --spin_us) data_parallel_spin samples/s / data_parallel
                          samples/s (above 1: the --spin_us poll beats the default)
  cpu_us_per_sample       the process's CPU time (every thread: trainers, replicas, reader) in
                          train_from_dataset, per sample, median of each run (the data-parallel
                          plan and replicas are made before it): far less sensitive to load
                          than samples/s, though spinning replicas burn more of it when loaded
  cpu_scaling_bound       2 x one_thread's cpu_us_per_sample / data_parallel's: the scaling the
                          data-parallel run would reach if neither replica ever waited (2 cores
                          busy against one). Where scaling_vs_one_thread falls short of it, the
                          replicas wait (for each other, or for a core); where the bound itself is
                          low, they do more work than one thread does
  polls_given_up_per_step per data-parallel run: the replicas' waits whose poll gave up (each
                          a likely sleep and wake-up), per step, median of each run, by what
                          they waited for (for_work: replica 1 for the next step or phase;
                          for_workers: replica 0 for the others to finish one; for_compute: a
                          replica for the others to finish the backward pass): counts, not times
  voluntary_switches_per_step  every run: the process's voluntary context switches (every
                          thread, reader included) in train_from_dataset per step of 2B samples
  replica_time_us_per_step per data-parallel run (Linux): where the wall time in
                          train_from_dataset of replica 1 (the runner's thread) went, per step,
                          median of each run: `on_core` (running: its ops, its reductions, its
                          polls), `preempted` (runnable but waiting for a core another thread,
                          such as the reader, or another process had) and `asleep` (blocked
                          after its poll gave up: waiting for replica 0 to finish the compute
                          program, a phase, or the bookkeeping between steps); and
                          `other_threads_cpu`, every other thread's CPU (replica 0, which runs
                          on a thread the pass starts and ends, and the reader). From
                          /proc/self/task/*/schedstat. On a quiet machine `asleep` plus
                          `preempted` over the step's wall time is about the share of a core
                          that scaling_vs_one_thread loses against cpu_scaling_bound
  auc                     test AUC after the pass, for each run (one_thread and data_parallel
                          take the same steps on the same batches, so theirs agree closely;
                          hogwild takes twice as many steps of half the batch)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "ctr_dnn")
sys.path.insert(0, EXAMPLE)

import baselines  # noqa: E402
import criteo_reader  # noqa: E402
import model  # noqa: E402
import numpy as np  # noqa: E402

import fleet  # noqa: E402
from fleet import layers  # noqa: E402

REPLICAS = 2
MLP_LAYERS, MLP_WIDTH = 4, 1024
RUNS = ("one_thread", "data_parallel", "hogwild")
PLAIN = "data_parallel_plain"
WHOLE_SPARSE = "data_parallel_whole_sparse"
WHOLE_DENSE = "data_parallel_whole_dense"
UNEVEN = "data_parallel_uneven"
UNSHARED = "data_parallel_unshared"
LATE = "data_parallel_late"
SPIN = "data_parallel_spin"
WEIGHT_PRODUCTS = "data_parallel_weight_products"
DATA_PARALLEL_KINDS = (
    "data_parallel",
    PLAIN,
    WHOLE_SPARSE,
    WHOLE_DENSE,
    UNEVEN,
    UNSHARED,
    LATE,
    SPIN,
    WEIGHT_PRODUCTS,
)
SPIN_ENV = "FLEET_DP_SPIN_US"


# -- data ---------------------------------------------------------------------------------------
def ctr_files(out: str, rows: int, test_rows: int) -> tuple[list[str], criteo_reader.CriteoArrays]:
    """Criteo-format data from the example's generator, written as MultiSlot files (two parts),
    and the test arrays."""
    subprocess.run(
        [
            sys.executable,
            os.path.join(EXAMPLE, "generate_data.py"),
            "--out",
            out,
            "--train_rows",
            str(rows),
            "--test_rows",
            str(test_rows),
            "--seed",
            "3",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    train = criteo_reader.read_criteo(os.path.join(out, "train.txt"))
    test = criteo_reader.read_criteo(os.path.join(out, "test.txt"))
    paths = []
    for part, index in enumerate(np.array_split(np.arange(len(train.label)), 2)):
        columns = [np.full((len(index), 1), criteo_reader.NUM_DENSE), train.dense[index]]
        for slot in range(criteo_reader.NUM_SPARSE):
            columns += [np.ones((len(index), 1), np.int64), train.sparse[index, slot : slot + 1]]
        columns += [np.ones((len(index), 1), np.int64), train.label[index]]
        path = os.path.join(out, f"train-multislot-{part}")
        with open(path, "w") as f:
            for row in zip(*columns):
                f.write(" ".join(" ".join(_fmt(v) for v in c) for c in row) + "\n")
        paths.append(path)
    return paths, test


def _fmt(value: object) -> str:
    return f"{value:.6g}" if isinstance(value, (float, np.floating)) else str(value)


def mlp_files(out: str, rows: int, test_rows: int) -> tuple[list[str], dict]:
    """Inputs N(0, 1) of MLP_WIDTH features; label 1 with probability sigmoid(teacher . x)."""
    rng = np.random.default_rng(5)
    teacher = rng.standard_normal(MLP_WIDTH).astype(np.float32) / np.sqrt(MLP_WIDTH) * 3

    def sample(n: int) -> tuple[np.ndarray, np.ndarray]:
        x = rng.standard_normal((n, MLP_WIDTH)).astype(np.float32)
        p = 1 / (1 + np.exp(-(x @ teacher)))
        return x, (rng.random(n) < p).astype(np.float32)[:, None]

    paths = []
    for part in range(2):
        x, y = sample(rows // 2)
        path = os.path.join(out, f"mlp-{part}")
        text = np.concatenate([np.full((len(x), 1), MLP_WIDTH), x, np.ones((len(x), 1)), y], 1)
        np.savetxt(path, text, fmt=["%d"] + ["%.4f"] * MLP_WIDTH + ["%d", "%d"])
        paths.append(path)
    tx, ty = sample(test_rows)
    return paths, {"x": tx, "label": ty}


# -- models -------------------------------------------------------------------------------------
def ctr_model() -> dict:
    net = model.build(model.ModelConfig(layout="slots"))
    block = net.main.global_block()
    return {
        "main": net.main,
        "startup": net.startup,
        "loss": net.loss,
        "use_vars": [block.var(n) for n in criteo_reader.MULTISLOT_SLOTS],
        "batch": 512,
        "score": lambda exe, scope, test: _ctr_auc(exe, scope, net, test),
    }


def _ctr_auc(exe, scope, net, test) -> float:
    probs = []
    for batch in criteo_reader.iterate_batches(test, 4096):
        (p,) = exe.run(
            net.test,
            feed=net.feed(batch.dense, batch.sparse, batch.label),
            fetch_list=[net.predict],
            scope=scope,
        )
        probs.append(p[:, 1])
    return float(baselines.roc_auc(test.label[:, 0], np.concatenate(probs)))


def mlp_model() -> dict:
    main, startup = fleet.Program(), fleet.Program()
    main.random_seed = startup.random_seed = 7
    with fleet.program_guard(main, startup):
        x = layers.data("x", [MLP_WIDTH], dtype="float32")
        label = layers.data("label", [1], dtype="float32")
        h = x
        for _ in range(MLP_LAYERS):
            h = layers.fc(h, MLP_WIDTH, act="relu")
        logit = layers.fc(h, 1)
        test = main.clone(for_test=True)
        loss = layers.mean(layers.sigmoid_cross_entropy_with_logits(logit, label))
        fleet.optimizer.SGD(0.05).minimize(loss)

    def score(exe, scope, data) -> float:
        (z,) = exe.run(test, feed={"x": data["x"]}, fetch_list=[logit], scope=scope)
        return float(baselines.roc_auc(data["label"][:, 0], z[:, 0]))

    return {
        "main": main,
        "startup": startup,
        "loss": loss,
        "use_vars": [x, label],
        "batch": 256,
        "score": score,
    }


# -- runs ---------------------------------------------------------------------------------------
def dataset(net: dict, files: list[str], batch: int, reader_threads: int) -> object:
    ds = fleet.DatasetFactory().create_dataset("InMemoryDataset")
    ds.set_use_var(net["use_vars"])
    ds.set_batch_size(batch)
    ds.set_thread(reader_threads)
    ds.set_filelist(files)
    ds.load_into_memory()
    return ds


@contextlib.contextmanager
def spin_env(spin_us: int | None):
    """FLEET_DP_SPIN_US=spin_us while the replicas are made (None: as the process has it)."""
    saved = os.environ.get(SPIN_ENV)
    if spin_us is not None:
        os.environ[SPIN_ENV] = str(spin_us)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(SPIN_ENV, None)
        else:
            os.environ[SPIN_ENV] = saved


def thread_times() -> dict[int, tuple[int, int]]:
    """Per thread of this process: (ns on a core, ns runnable but waiting for one) so far, from
    /proc/self/task/<tid>/schedstat (Linux; empty where it cannot be read)."""
    times = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return times
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                on_core, waiting = f.read().split()[:2]
        except (OSError, ValueError):
            continue  # the thread ended meanwhile
        times[int(tid)] = (int(on_core), int(waiting))
    return times


def replica_times(
    before: dict[int, tuple[int, int]],
    after: dict[int, tuple[int, int]],
    wall_s: float,
    cpu_s: float,
    steps: float,
) -> dict | None:
    """Replicas 1.. (the runner's threads, made before the pass; replica 0 runs on a thread the
    pass starts and ends, as the reader does, so its own times are gone when the pass returns):
    each one's wall time in the pass, per step, split into on a core, preempted and asleep; and
    the CPU of every other thread (replica 0, the reader). None without schedstat."""
    me = threading.get_native_id()  # waits for the pass, waking every 100 ms
    ran = {
        t: (after[t][0] - before[t][0], after[t][1] - before[t][1]) for t in before if t in after
    }
    workers = sorted((t for t in ran if t != me), key=lambda t: -ran[t][0])[: REPLICAS - 1]
    if len(workers) < REPLICAS - 1:
        return None
    wall_ns = wall_s * 1e9
    per_step = 1e-3 / steps  # ns in the pass to us a step
    return {
        "on_core": [ran[t][0] * per_step for t in workers],
        "preempted": [ran[t][1] * per_step for t in workers],
        "asleep": [max(wall_ns - ran[t][0] - ran[t][1], 0) * per_step for t in workers],
        "other_threads_cpu": max(cpu_s * 1e9 - sum(ran[t][0] for t in workers), 0) * per_step,
    }


def voluntary_switches() -> int:
    """The process's voluntary context switches so far, every thread (ended ones included)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw


def one_run(kind: str, net: dict, ds: object, test: object, spin_us: int | None) -> dict:
    exe = fleet.Executor(fleet.CPUPlace())
    scope = fleet._core.Scope()
    exe.run(net["startup"], scope=scope)
    polls_given_up = None
    deferred = None
    if kind in DATA_PARALLEL_KINDS:
        build = fleet.BuildStrategy()
        build.overlap_reduction = kind != PLAIN
        build.split_sparse_updates = kind != WHOLE_SPARSE
        build.split_dense_updates = kind != WHOLE_DENSE
        build.even_barrier_work = kind != UNEVEN
        build.share_barrier_work = kind != UNSHARED
        build.early_barrier_work = kind != LATE
        build.split_weight_gradients = kind == WEIGHT_PRODUCTS
        program = fleet.CompiledProgram(net["main"]).with_data_parallel(
            loss_name=net["loss"].name, build_strategy=build, places=REPLICAS
        )
        # The plan and the replicas are made here, outside the CPU time measured below (the
        # pass's own timing, result.seconds, leaves them out too).
        with spin_env(spin_us if kind == SPIN else None):
            runner = exe.data_parallel_runner(program, scope)
        given_up_start = runner.polls_given_up
        shared_start = runner.shared_barrier_tasks
        early_start = runner.early_barrier_tasks
        switches_start = voluntary_switches()
        threads_start = thread_times()
        wall_start = time.perf_counter()
        cpu_start = time.process_time()
        result = exe.train_from_dataset(program, ds, scope=scope, print_period=0)
        cpu_seconds = time.process_time() - cpu_start
        wall_seconds = time.perf_counter() - wall_start
        threads_end = thread_times()
        given_up = runner.polls_given_up
        polls_given_up = {k: given_up[k] - given_up_start[k] for k in given_up}
        deferred = runner.deferred_reductions
        shared = runner.shared_barrier_tasks - shared_start
        early = runner.early_barrier_tasks - early_start
    else:
        threads = 1 if kind == "one_thread" else REPLICAS
        switches_start = voluntary_switches()
        cpu_start = time.process_time()
        result = exe.train_from_dataset(
            net["main"], ds, scope=scope, thread=threads, print_period=0
        )
        cpu_seconds = time.process_time() - cpu_start
    switches = voluntary_switches() - switches_start
    steps = result.samples / (REPLICAS * net["batch"])
    auc = net["score"](exe, scope, test)
    exe.close()
    out = {
        "samples_per_s": result.samples / result.seconds,
        "cpu_us_per_sample": cpu_seconds / result.samples * 1e6,
        "voluntary_switches_per_step": switches / steps,
        "auc": auc,
    }
    if deferred is not None:
        out["deferred_reductions"] = deferred
    if polls_given_up is not None:
        out["polls_given_up_per_step"] = {k: n / steps for k, n in polls_given_up.items()}
        out["shared_barrier_tasks_per_step"] = shared / steps
        out["early_barrier_tasks_per_step"] = early / steps
        times = replica_times(threads_start, threads_end, wall_seconds, cpu_seconds, steps)
        if times is not None:
            out["replica_time_us_per_step"] = times
    return out


def measure(
    name: str,
    net: dict,
    files: list[str],
    test: object,
    rounds: int,
    kinds: tuple[str, ...],
    reader_threads: int,
    spin_us: int | None,
) -> dict:
    # One thread reads the data-parallel step's global batch; replicas and Hogwild threads B.
    datasets = {
        "one_thread": dataset(net, files, REPLICAS * net["batch"], reader_threads),
        "data_parallel": dataset(net, files, net["batch"], reader_threads),
    }
    for kind in ("hogwild",) + DATA_PARALLEL_KINDS[1:]:
        datasets[kind] = datasets["data_parallel"]
    runs: dict[str, list[dict]] = {k: [] for k in kinds}
    loads = []
    for r in range(rounds):
        order = kinds[r % len(kinds) :] + kinds[: r % len(kinds)]
        before = os.getloadavg()[0]
        for kind in order:
            runs[kind].append(one_run(kind, net, datasets[kind], test, spin_us))
        loads.append({"round": r, "load1_before": before, "load1_after": os.getloadavg()[0]})
        print(
            f"{name} round {r}: "
            + ", ".join(f"{k} {runs[k][-1]['samples_per_s']:.0f}/s" for k in kinds)
            + f" (load {before:.2f})",
            flush=True,
        )
    median = {k: statistics.median(x["samples_per_s"] for x in runs[k]) for k in kinds}
    cpu = {k: statistics.median(x["cpu_us_per_sample"] for x in runs[k]) for k in kinds}
    out = {
        "samples_per_s": median,
        "scaling_vs_one_thread": median["data_parallel"] / median["one_thread"],
        "cpu_us_per_sample": cpu,
        "cpu_scaling_bound": REPLICAS * cpu["one_thread"] / cpu["data_parallel"],
        "hogwild_vs_one_thread": median["hogwild"] / median["one_thread"],
        "data_parallel_vs_hogwild": median["data_parallel"] / median["hogwild"],
        "voluntary_switches_per_step": {
            k: statistics.median(x["voluntary_switches_per_step"] for x in runs[k]) for k in kinds
        },
        "polls_given_up_per_step": {
            k: {
                site: statistics.median(x["polls_given_up_per_step"][site] for x in runs[k])
                for site in runs[k][0]["polls_given_up_per_step"]
            }
            for k in kinds
            if k in DATA_PARALLEL_KINDS
        },
        "replica_time_us_per_step": {
            k: _median_times([x["replica_time_us_per_step"] for x in runs[k]])
            for k in kinds
            if k in DATA_PARALLEL_KINDS and "replica_time_us_per_step" in runs[k][0]
        },
        "deferred_reductions": {
            k: runs[k][0]["deferred_reductions"] for k in kinds if k in DATA_PARALLEL_KINDS
        },
        "shared_barrier_tasks_per_step": {
            k: statistics.median(x["shared_barrier_tasks_per_step"] for x in runs[k])
            for k in kinds
            if k in DATA_PARALLEL_KINDS
        },
        "early_barrier_tasks_per_step": {
            k: statistics.median(x["early_barrier_tasks_per_step"] for x in runs[k])
            for k in kinds
            if k in DATA_PARALLEL_KINDS
        },
        "auc": {k: statistics.median(x["auc"] for x in runs[k]) for k in kinds},
        "samples_per_update": {
            "one_thread": REPLICAS * net["batch"],
            "data_parallel": REPLICAS * net["batch"],
            "hogwild": net["batch"],
        },
        "rounds": loads,
    }
    for kind, key in (
        (PLAIN, "overlap_gain"),
        (WHOLE_SPARSE, "split_gain"),
        (WHOLE_DENSE, "dense_split_gain"),
        (UNEVEN, "barrier_evening_gain"),
        (UNSHARED, "barrier_sharing_gain"),
        (LATE, "barrier_early_gain"),
    ):
        if kind in kinds:
            out[key] = median["data_parallel"] / median[kind]
            out["samples_per_update"][kind] = REPLICAS * net["batch"]
    if SPIN in kinds:
        out["spin_gain"] = median[SPIN] / median["data_parallel"]
        out["samples_per_update"][SPIN] = REPLICAS * net["batch"]
    if WEIGHT_PRODUCTS in kinds:
        out["weight_product_gain"] = median[WEIGHT_PRODUCTS] / median["data_parallel"]
        out["samples_per_update"][WEIGHT_PRODUCTS] = REPLICAS * net["batch"]
    return out


def _median_times(runs: list[dict]) -> dict:
    """The element-wise median of replica_times() results."""
    out: dict = {}
    for key, first in runs[0].items():
        if isinstance(first, list):
            out[key] = [statistics.median(r[key][i] for r in runs) for i in range(len(first))]
        else:
            out[key] = statistics.median(r[key] for r in runs)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small data, 1 round (a minute)")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument(
        "--plain_reduction",
        action="store_true",
        help="also run data_parallel with the reduction after the backward pass (overlap_gain)",
    )
    parser.add_argument(
        "--whole_sparse_updates",
        action="store_true",
        help="also run data_parallel with each is_sparse table updated by one replica (split_gain)",
    )
    parser.add_argument(
        "--whole_dense_updates",
        action="store_true",
        help="also run data_parallel with unbalanced dense gradients kept whole (dense_split_gain)",
    )
    parser.add_argument(
        "--uneven_barrier_work",
        action="store_true",
        help="also run data_parallel with BuildStrategy.even_barrier_work = False "
        "(barrier_evening_gain)",
    )
    parser.add_argument(
        "--unshared_barrier_work",
        action="store_true",
        help="also run data_parallel with BuildStrategy.share_barrier_work = False "
        "(barrier_sharing_gain)",
    )
    parser.add_argument(
        "--late_barrier_work",
        action="store_true",
        help="also run data_parallel with BuildStrategy.early_barrier_work = False "
        "(barrier_early_gain)",
    )
    parser.add_argument(
        "--weight_products",
        action="store_true",
        help="also run data_parallel with BuildStrategy.split_weight_gradients = True "
        "(weight_product_gain)",
    )
    parser.add_argument(
        "--reader_threads",
        type=int,
        default=1,
        help="threads that gather the in-memory batches (1, the default: every run trains on the "
        "batches in file order; 2: two producers fill the channel in an order timing decides)",
    )
    parser.add_argument(
        "--spin_us",
        type=int,
        default=None,
        help="also run data_parallel with FLEET_DP_SPIN_US set to this (the replicas' poll "
        "before sleeping, in microseconds; spin_gain)",
    )
    args = parser.parse_args()
    rounds = args.rounds or (1 if args.quick else 5)
    ctr_rows, mlp_rows = (8192, 2048) if args.quick else (100_000, 16_384)
    kinds = RUNS + ((PLAIN,) if args.plain_reduction else ())
    kinds += (WHOLE_SPARSE,) if args.whole_sparse_updates else ()
    kinds += (WHOLE_DENSE,) if args.whole_dense_updates else ()
    kinds += (UNEVEN,) if args.uneven_barrier_work else ()
    kinds += (UNSHARED,) if args.unshared_barrier_work else ()
    kinds += (LATE,) if args.late_barrier_work else ()
    kinds += (WEIGHT_PRODUCTS,) if args.weight_products else ()
    kinds += (SPIN,) if args.spin_us is not None else ()
    fleet._core.set_blas_threads(1)
    started = time.perf_counter()
    start_load = os.getloadavg()
    out: dict = {
        "replicas": REPLICAS,
        "cores": os.cpu_count(),
        "quick": args.quick,
        "reader_threads": args.reader_threads,
        "spin_us": {"data_parallel": os.environ.get(SPIN_ENV, "default"), SPIN: args.spin_us},
        "load_average_at_start": start_load,
    }
    with tempfile.TemporaryDirectory(prefix="fleet-dp-bench-") as tmp:
        files, test = ctr_files(tmp, ctr_rows, ctr_rows // 4)
        out["ctr_dnn"] = measure(
            "ctr_dnn", ctr_model(), files, test, rounds, kinds, args.reader_threads, args.spin_us
        )
        files, test = mlp_files(tmp, mlp_rows, mlp_rows // 4)
        out["mlp"] = measure(
            "mlp", mlp_model(), files, test, rounds, kinds, args.reader_threads, args.spin_us
        )
    out["load_average_at_end"] = os.getloadavg()
    out["seconds"] = time.perf_counter() - started
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
