"""Benchmark: CTR-DNN parameter-server training (--servers servers, default 1, and --workers
workers, default 2 on this 2-core machine, --thread trainer threads each, default 1) in async,
GEO and sync modes, against PaddlePaddle 2.6.2's parameter server (fleet 2.x API, the_one_ps) on
the same files in the same run, and against Fleet's own single process.

    .venv/bin/python benchmarks/ps_train.py [--quick] [--rounds N] [--thread N] [--servers N]
        [--workers N] [--skip_peer]

Figures that hold on a shared machine: every job runs --rounds times (3; 1 with --quick), the
Fleet and Paddle jobs of a mode one after the other, Fleet first in even rounds and Paddle first
in odd ones; the JSON has every round and each job's median. Each job records the 1-minute load
average before and after it (a warning when above 2), and its CPU seconds per sample: user + sys
of the launcher and every process it started (this process is their subreaper, so servers a
launcher leaves behind are counted too), over the samples trained. That figure includes start-up
and the test-file evaluation, so compare it between jobs of the same rows; it moves far less with
the machine's load than samples/s does.

Data: examples/ctr_dnn/generate_data.py rows (400k; 200k with --quick, so that a job lasts more
than 10 s), cached as examples/ctr_dnn/run_job.py caches them
(.cache/ctr_dnn/seed0_<rows>_<test_rows>/), the training file split into one part per worker
thread.

Both sides train with train_from_dataset (QueueDataset, --thread threads, worker i reading parts
i, i+W, ...).
--reader multislot (default): the parts converted once to MultiSlot text and read through
pipe_command "cat", so the C++ feeds parse them; --reader criteo: the raw parts through
examples/ctr_dnn/criteo_reader.py, a Python parser that then takes about half of the job's CPU
on both sides (measured: 7.9 CPU-s per reader against 5-6 per worker for 100k rows).

Fleet: `fleetrun --server_num=S --worker_num=2 examples/ctr_dnn/train_ps.py --mode MODE
--dataset queue --thread T`; `fleet_command` is the one place that builds it (--driver loop:
the Executor.run loop on NumPy batches of the whole file instead). samples/s is the
job's `total_samples_per_sec=` (all workers' samples over the longest worker's training time)
and the AUC worker 0's `test_auc=` on the test file.
Fleet single process: examples/ctr_dnn/train_dataset.py, train_from_dataset with one thread on
the same files and pipe_command (same model, optimizer and batch), the reference of
<mode>_vs_single and of the AUC gap.

Paddle (benchmarks/peers/paddle_ps_ctr_dnn.py in .venv-peers/paddle26, bash
benchmarks/peers/setup.sh 2.6.2): the same network, optimizer and files, launched by
`python -m paddle.distributed.launch --server_num=S --worker_num=2` with PADDLE_WITH_GLOO=1,
the same files and pipe_command, timed the same way. Paddle 2.6.2's sync mode crashes (SIGSEGV
in SendBarrierOp) on this build: it is tried, and while it fails sync is compared with Paddle's
single-process run (same driver), as the JSON says. Peers not installed are skipped and named in
the JSON.

JSON: each mode's median samples/s and AUC, `<mode>_vs_single` (over Fleet's single-process
median), `async_auc_gap` (single-process AUC minus async AUC), `<mode>_ratio_vs_paddle`,
`<job>_cpu_s_per_sample`, and `rounds`: every job of every round. The last line of output is
one JSON object.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "ctr_dnn")
PEER_PYTHON = os.path.join(ROOT, ".venv-peers", "paddle26", "bin", "python")
PEER_SCRIPT = os.path.join(ROOT, "benchmarks", "peers", "paddle_ps_ctr_dnn.py")
MODES = ("async", "geo", "sync")
WORKERS = 2  # the default of --workers
BATCH = 512
GEO_K = 10  # train_ps.py's default update frequency, and the README's
JOB_TIMEOUT_S = 900
# Targets from issue 28: against Paddle in the same run (sync against Paddle's single process
# while its sync crashes), and against Fleet's own single process.
MIN_RATIO = {"async": 2.0, "geo": 2.0, "sync": 2.5}
MIN_VS_SINGLE = {"async": 1.6, "geo": 1.8, "sync": 1.5}
MAX_AUC_GAP = 0.005
# A 1-minute load average above this (2 cores) means the figures of that job are not a quiet
# machine's.
LOADAVG_WARNING = 2.0
PR_SET_CHILD_SUBREAPER = 36

sys.path.insert(0, os.path.join(ROOT, "examples", "ctr_dnn"))
import criteo_reader  # noqa: E402
import numpy as np  # noqa: E402
from job_runner import paddle_ps_launch, run_in_session, tail  # noqa: E402
from rounds import in_turn, max_load, medians, with_load  # noqa: E402

from fleet.data_generator import python_pipe_command  # noqa: E402


def prepare_data(data_dir: str, rows: int, test_rows: int, num_parts: int) -> dict:
    """{"train": the whole file, "parts": `num_parts` files, "test", "oracle_auc"}."""
    out = os.path.join(data_dir, f"seed0_{rows}_{test_rows}")
    if not os.path.isfile(os.path.join(out, "oracle.json")):
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
                "0",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            timeout=600,
        )
    train = os.path.join(out, "train.txt")
    parts = [os.path.join(out, f"parts{num_parts}", f"train-{i}.txt") for i in range(num_parts)]
    if not all(os.path.isfile(p) for p in parts):
        _split_lines(train, parts)
    with open(os.path.join(out, "oracle.json")) as f:
        oracle = json.load(f)["oracle_auc"]
    return {
        "train": train,
        "parts": parts,
        "test": os.path.join(out, "test.txt"),
        "oracle_auc": oracle,
    }


def multislot_parts(data: dict) -> list[str]:
    """The training parts in MultiSlot form (criteo_reader.MULTISLOT_SLOTS: 13 dense floats, one
    id per C1..C26, the label), cached beside them: read with pipe_command "cat", so that
    neither side spends its CPU parsing Criteo text in Python."""
    out = []
    for part in data["parts"]:
        path = part[: -len(".txt")] + ".multislot"
        if not os.path.isfile(path):
            rows = criteo_reader.read_criteo([part])
            dense = np.char.mod("%.6g", rows.dense)
            ids = np.char.add("1 ", rows.sparse.astype(str))
            with open(path + ".tmp", "w", encoding="ascii") as f:
                for i in range(len(rows)):
                    f.write(f"13 {' '.join(dense[i])} {' '.join(ids[i])} 1 {rows.label[i, 0]}\n")
            os.replace(path + ".tmp", path)
        out.append(path)
    return out


def _split_lines(path: str, parts: list[str]) -> None:
    """Contiguous, equal-sized (to a line) parts, so that every worker gets as many batches."""
    with open(path, "rb") as f:
        lines = f.readlines()
    os.makedirs(os.path.dirname(parts[0]), exist_ok=True)
    per_part = len(lines) // len(parts)
    for i, part in enumerate(parts):
        with open(part + ".tmp", "wb") as f:
            f.writelines(lines[i * per_part : (i + 1) * per_part])
        os.replace(part + ".tmp", part)


def _fleet_env() -> dict:
    # One BLAS thread per process: the job's processes already share the cores.
    return dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")


def fleet_command(
    mode: str, data: dict, log_dir: str, args: argparse.Namespace, extra: tuple[str, ...] = ()
) -> list[str]:
    """The Fleet job of one mode: the only place that says how train_ps.py is launched."""
    launcher = os.path.join(os.path.dirname(sys.executable), "fleetrun")
    command = [launcher] if os.path.exists(launcher) else [sys.executable, "-m", "fleet.launch"]
    command += [
        f"--server_num={args.servers}",
        f"--worker_num={args.workers}",
        f"--log_dir={log_dir}",
        os.path.join(EXAMPLE, "train_ps.py"),
        "--mode",
        mode,
        "--update_frequency",
        str(GEO_K),
        "--batch_size",
        str(BATCH),
    ]
    if args.driver == "dataset":
        command += ["--dataset", "queue", "--thread", str(args.thread)]
        command += ["--train", *data["dataset_files"]]
        if data["pipe"] == "cat":  # else train_ps.py's own reader, the same Criteo parser
            command += ["--pipe_command", "cat"]
    else:
        command += ["--train", data["train"]]
    command += ["--local_transport", args.local_transport]
    if args.feed_priority:
        command += ["--feed_priority", args.feed_priority]
    return command + ["--test", data["test"], *extra]


def _reap_orphans(deadline_s: float = 5.0) -> None:
    """Waits for the job's processes that outlived their launcher and were killed with its
    session (they are this process's children as its subreaper), so that their CPU time is in
    RUSAGE_CHILDREN."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.05)


def run_job(command: list[str], log_path: str, env: dict, cwd: str) -> dict:
    """Runs one job (job_runner.run_in_session) and measures it: exit code, wall seconds, the
    load average before and after (rounds.with_load), and the CPU seconds (user + sys) of all its
    processes."""

    def run() -> dict:
        usage_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        rc, wall = run_in_session(command, log_path, env, cwd, JOB_TIMEOUT_S)
        _reap_orphans()
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (usage.ru_utime - usage_before.ru_utime) + (usage.ru_stime - usage_before.ru_stime)
        return {"rc": rc, "wall": wall, "cpu_s": cpu}

    return with_load(os.path.basename(os.path.dirname(log_path)), run)


def _measured(job: dict, samples: int) -> dict:
    """The figures of a finished job that every job reports."""
    return {
        "job_wall_s": round(job["wall"], 1),
        "cpu_s": round(job["cpu_s"], 2),
        "cpu_s_per_sample": job["cpu_s"] / samples if samples else None,
        "loadavg_1min_before": job["loadavg_1min_before"],
        "loadavg_1min_after": job["loadavg_1min_after"],
    }


def measure_fleet_ps(
    mode: str, data: dict, scratch: str, args: argparse.Namespace, variant: str = ""
) -> dict:
    """One Fleet job; variant "unbounded" (async) lifts the dense staleness bound."""
    name = f"{mode}_{variant}" if variant else mode
    log_dir = tempfile.mkdtemp(prefix=f"fleet_{name}_", dir=scratch)
    launcher_log = os.path.join(log_dir, "launcher.log")
    extra = ("--max_dense_staleness", "-1") if variant == "unbounded" else ()
    command = fleet_command(mode, data, log_dir, args, extra)
    job = run_job(command, launcher_log, _fleet_env(), ROOT)
    worker0 = os.path.join(log_dir, "workerlog.0")
    text = tail(worker0, 10**7) + tail(launcher_log, 10**7)
    total = re.findall(r"total_samples=(\d+) total_samples_per_sec=([0-9.]+)", text)
    auc = re.findall(r"test_auc=([0-9.]+)", text)
    if job["rc"] != 0 or not total or not auc:
        raise SystemExit(
            f"Fleet {name} job failed (exit {job['rc']}); logs in {log_dir}:\n"
            f"{tail(launcher_log)}\n{tail(worker0)}"
        )
    per_worker = {}
    for path in sorted(glob.glob(os.path.join(log_dir, "workerlog.*"))):
        found = re.findall(
            r"worker (\d+): samples=(\d+) samples_per_sec=([0-9.]+)", tail(path, 10**7)
        )
        for index, samples, rate in found:
            per_worker[index] = {"samples": int(samples), "samples_per_sec": float(rate)}
    samples = int(total[-1][0])
    return {
        "samples_per_sec": float(total[-1][1]),
        "test_auc": float(auc[-1]),
        "samples": samples,
        "workers": per_worker,
        **_measured(job, samples),
    }


def measure_fleet_single(data: dict, scratch: str, feed_priority: str = "") -> dict:
    log = os.path.join(tempfile.mkdtemp(prefix="fleet_single_", dir=scratch), "train.log")
    # The same driver as the PS jobs' workers (train_from_dataset, one thread, the same files
    # and pipe_command), so that <mode>_vs_single compares the data path and nothing else.
    command = [
        sys.executable,
        os.path.join(EXAMPLE, "train_dataset.py"),
        "--thread",
        "1",
        "--dataset",
        "queue",
        "--pipe_command",
        data["pipe"],
        "--train",
        *data["dataset_files"],
        "--test",
        data["test"],
        "--batch_size",
        str(BATCH),
        "--print_period",
        "1000",
        "--json",
    ]
    if feed_priority:
        command += ["--feed_priority", feed_priority]
    job = run_job(command, log, _fleet_env(), ROOT)
    summary = [line for line in tail(log, 10**7).splitlines() if line.startswith("{")]
    if job["rc"] != 0 or not summary:
        raise SystemExit(f"Fleet single-process run failed (exit {job['rc']}):\n{tail(log)}")
    result = json.loads(summary[-1])
    return {
        "samples_per_sec": result["samples_per_sec"],
        "test_auc": result["test_auc"],
        "samples": result["samples"],
        **_measured(job, result["samples"]),
    }


def measure_paddle(mode: str, data: dict, scratch: str, args: argparse.Namespace) -> dict:
    """Paddle 2.6.2 in `mode` (async, geo, sync, or single: one process); {"failed": why} if the
    job did not produce every worker's figures."""
    out_dir = tempfile.mkdtemp(prefix=f"paddle_{mode}_", dir=scratch)
    script_args = [
        PEER_SCRIPT,
        "--mode",
        mode,
        "--train_files",
        *data["dataset_files"],
        "--test_file",
        data["test"],
        "--pipe_command",
        data["pipe"],
        "--out_dir",
        out_dir,
        "--batch_size",
        str(BATCH),
        "--k_steps",
        str(GEO_K),
    ]
    env = dict(os.environ, PADDLE_WITH_GLOO="1")
    env.pop("PYTHONPATH", None)
    if mode == "single":
        # One process, one thread: the reference the PS jobs' threads are compared with.
        command, expected = [PEER_PYTHON, *script_args], 1
    else:
        script_args += ["--thread", str(args.thread)]
        log_dir = os.path.join(out_dir, "log")
        command = paddle_ps_launch(PEER_PYTHON, args.workers, log_dir, script_args, args.servers)
        expected = args.workers
    launcher_log = os.path.join(out_dir, "launcher.log")
    # In the scratch folder: Paddle writes its train_desc prototxt files into the cwd.
    job = run_job(command, launcher_log, env, out_dir)
    results = []
    for path in sorted(glob.glob(os.path.join(out_dir, "worker*.json"))):
        with open(path) as f:
            results.append(json.load(f))
    # The launcher exits 0 even when its workers crash: count the workers' own reports.
    if len(results) != expected or job["rc"] != 0:
        logs = "".join(tail(p, 10**7) for p in glob.glob(os.path.join(out_dir, "log", "*")))
        logs += tail(launcher_log, 10**7)
        why = f"exit {job['rc']}, {len(results)} of {expected} workers reported"
        if "SendBarrierOp" in logs and "SIGSEGV" in logs:
            why = "SIGSEGV in SendBarrierOp (" + why + ")"
        return {"failed": why}  # the logs: rerun with --keep_logs
    samples = sum(r["samples"] for r in results)
    longest = max(r["seconds"] for r in results)
    auc = [r["test_auc"] for r in results if "test_auc" in r]
    return {
        "samples_per_sec": samples / longest,
        "test_auc": auc[0],
        "samples": samples,
        "version": results[0]["paddle_version"],
        **_measured(job, samples),
    }


def _ratio(ours: dict, peer: dict | None) -> float | None:
    if peer is None or "samples_per_sec" not in peer:
        return None
    return round(ours["samples_per_sec"] / peer["samples_per_sec"], 3)


def median_job(runs: list[dict]) -> dict:
    """One job's figures over the rounds: the median of each, {"failed": ...} when no round
    produced figures."""
    ok = [r for r in runs if "failed" not in r]
    if not ok:
        return {"failed": runs[0]["failed"]}
    out: dict = medians(ok, ("samples_per_sec", "test_auc", "cpu_s_per_sample"))
    out["rounds"] = len(ok)
    out["max_loadavg_1min"] = max_load(ok)
    if "version" in ok[0]:
        out["version"] = ok[0]["version"]
    if len(ok) < len(runs):
        out["failed_rounds"] = [r["failed"] for r in runs if "failed" in r]
    return out


def build_result(
    args: argparse.Namespace, data: dict, fleet: dict, paddle: dict, rounds: list[dict]
) -> dict:
    """`fleet` and `paddle`: each job's median_job; paddle {"skipped": why} without the peer."""
    notes = []
    single = fleet["single"]
    result: dict = {
        "benchmark": "ps_train",
        "quick": args.quick,
        "rounds": args.rounds,
        "rows": args.rows,
        "test_rows": args.test_rows,
        "servers": args.servers,
        "workers": args.workers,
        "threads_per_worker": args.thread,
        "batch_size": BATCH,
        "optimizer": "adam lr 1e-3",
        "geo_k_steps": GEO_K,
        "fleet_driver": args.driver,
        "local_transport": args.local_transport,
        "feed_priority": getattr(args, "feed_priority", None) or "library default",
        "reader": args.reader,
        "oracle_auc": data["oracle_auc"],
        "loadavg_1min": os.getloadavg()[0],
        "max_loadavg_1min": max(
            job["max_loadavg_1min"]
            for side in (fleet, paddle)
            for job in side.values()
            if isinstance(job, dict) and "max_loadavg_1min" in job
        ),
        "fleet_single_samples_per_sec": round(single["samples_per_sec"]),
        "fleet_single_auc": round(single["test_auc"], 5),
    }
    for mode in MODES:
        result[f"{mode}_samples_per_sec"] = round(fleet[mode]["samples_per_sec"])
        result[f"{mode}_auc"] = round(fleet[mode]["test_auc"], 5)
        result[f"{mode}_vs_single"] = round(
            fleet[mode]["samples_per_sec"] / single["samples_per_sec"], 3
        )
    result["async_auc_gap"] = round(single["test_auc"] - fleet["async"]["test_auc"], 5)
    # Async without the dense staleness bound (Paddle's behaviour): faster, lower AUC.
    result["async_unbounded_samples_per_sec"] = round(fleet["async_unbounded"]["samples_per_sec"])
    result["async_unbounded_auc"] = round(fleet["async_unbounded"]["test_auc"], 5)
    result["async_unbounded_vs_single"] = round(
        fleet["async_unbounded"]["samples_per_sec"] / single["samples_per_sec"], 3
    )
    for job, figures in fleet.items():
        result[f"fleet_{job}_cpu_s_per_sample"] = figures["cpu_s_per_sample"]
    if "skipped" in paddle:
        notes.append(paddle["skipped"])
        for mode in MODES:
            result[f"{mode}_ratio_vs_paddle"] = None
        result["async_unbounded_ratio_vs_paddle"] = None
        result["paddle_async_auc"] = result["paddle_geo_auc"] = None
    else:
        if "failed" in paddle["single"]:
            raise SystemExit(f"Paddle single-process run failed: {paddle['single']}")
        result["paddle_version"] = paddle["single"].get("version")
        result["paddle_single_samples_per_sec"] = round(paddle["single"]["samples_per_sec"])
        result["paddle_single_auc"] = round(paddle["single"]["test_auc"], 5)
        for job, figures in paddle.items():
            if "failed" not in figures:
                result[f"paddle_{job}_cpu_s_per_sample"] = figures["cpu_s_per_sample"]
        for mode in MODES:
            peer = paddle[mode]
            if "failed" in peer:
                result[f"paddle_{mode}_failed"] = peer["failed"]
            else:
                result[f"paddle_{mode}_samples_per_sec"] = round(peer["samples_per_sec"])
                result[f"paddle_{mode}_auc"] = round(peer["test_auc"], 5)
        for mode in ("async", "geo"):
            result[f"{mode}_ratio_vs_paddle"] = _ratio(fleet[mode], paddle[mode])
        result["async_unbounded_ratio_vs_paddle"] = _ratio(
            fleet["async_unbounded"], paddle["async"]
        )
        result.setdefault("paddle_async_auc", None)
        result.setdefault("paddle_geo_auc", None)
        sync_peer = paddle["sync"]
        if "failed" in sync_peer:
            sync_peer = paddle["single"]
            notes.append(
                f"Paddle 2.6.2 sync mode failed ({paddle['sync']['failed']}): "
                "sync_ratio_vs_paddle is against Paddle's single-process run "
                "(train_from_dataset, 1 thread, same files)"
            )
        result["sync_ratio_vs_paddle"] = _ratio(fleet["sync"], sync_peer)
        result["sync_ratio_vs"] = (
            "paddle_single" if sync_peer is paddle["single"] else "paddle_sync"
        )
    if result["max_loadavg_1min"] > LOADAVG_WARNING:
        notes.append(
            f"load average up to {result['max_loadavg_1min']:.2f} during the jobs: "
            "samples/s are not a quiet machine's (cpu_s_per_sample holds better)"
        )
    result["targets"] = _targets(result)
    result["notes"] = notes
    result["fleet_jobs"] = fleet
    result["paddle_jobs"] = paddle
    result["rounds_detail"] = rounds
    return result


def _targets(result: dict) -> dict:
    """Issue 28's targets, each True / False, or None where the figure is missing."""
    out = {}
    for mode in MODES:
        out[f"{mode}_vs_single_at_least_{MIN_VS_SINGLE[mode]}"] = (
            result[f"{mode}_vs_single"] >= MIN_VS_SINGLE[mode]
        )
        ratio = result.get(f"{mode}_ratio_vs_paddle")
        out[f"{mode}_ratio_at_least_{MIN_RATIO[mode]}"] = (
            None if ratio is None else ratio >= MIN_RATIO[mode]
        )
        gap = result[f"{mode}_auc"] - result["fleet_single_auc"]
        out[f"{mode}_auc_within_{MAX_AUC_GAP}_of_single"] = abs(gap) <= MAX_AUC_GAP
        peer_auc = result.get(f"paddle_{mode}_auc")
        out[f"{mode}_auc_not_below_paddle"] = (
            None if peer_auc is None else result[f"{mode}_auc"] >= peer_auc
        )
    return out


def run_round(
    index: int, data: dict, scratch: str, args: argparse.Namespace, with_peer: bool
) -> dict:
    """One round: each job of Fleet and its Paddle counterpart back to back (so both sides of a
    ratio see about the same load), Fleet first in even rounds and Paddle first in odd ones."""
    fleet_first = index % 2 == 0
    out: dict = {"round": index, "fleet_first": fleet_first, "fleet": {}, "paddle": {}}

    def record(side: str, name: str, figures: dict) -> None:
        out[side][name] = figures
        print(f"round {index} {side} {name}: {json.dumps(figures)}", flush=True)

    def fleet_jobs(mode: str) -> None:
        if mode == "single":
            record("fleet", "single", measure_fleet_single(data, scratch, args.feed_priority or ""))
        else:
            record("fleet", mode, measure_fleet_ps(mode, data, scratch, args))
        if mode == "async":
            unbounded = measure_fleet_ps(mode, data, scratch, args, "unbounded")
            record("fleet", "async_unbounded", unbounded)

    def paddle_job(mode: str) -> None:
        if with_peer:
            record("paddle", mode, measure_paddle(mode, data, scratch, args))

    for mode in ("single", *MODES):
        for job in in_turn(index, (fleet_jobs, paddle_job)):
            job(mode)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="fewer rows and one round (jobs of 10 s or more)"
    )
    parser.add_argument(
        "--rounds", type=int, default=0, help="rounds of every job (default 3; --quick 1)"
    )
    parser.add_argument(
        "--rows", type=int, default=0, help="generated training rows (default 400k; --quick 200k)"
    )
    parser.add_argument(
        "--test_rows", type=int, default=0, help="generated test rows (default 50k; --quick 10k)"
    )
    parser.add_argument("--thread", type=int, default=1, help="trainer threads per worker")
    parser.add_argument("--servers", type=int, default=1, help="parameter servers")
    parser.add_argument(
        "--workers",
        type=int,
        default=WORKERS,
        help="workers (2 on this 2-core machine; more on a larger one)",
    )
    parser.add_argument(
        "--driver",
        choices=("dataset", "loop"),
        default="dataset",
        help="Fleet's driver: train_from_dataset (as the peer) or Executor.run",
    )
    parser.add_argument(
        "--reader",
        choices=("multislot", "criteo"),
        default="multislot",
        help="train_from_dataset input on both sides: MultiSlot files through cat (default), "
        "or the raw Criteo parts through examples/ctr_dnn/criteo_reader.py (Python parsing)",
    )
    parser.add_argument(
        "--local_transport",
        choices=("off", "unix", "shm"),
        default="shm",
        help="Fleet's workers to their servers: loopback TCP, Unix sockets or shared memory "
        "(default, as the strategy's)",
    )
    parser.add_argument(
        "--feed_priority",
        choices=("normal", "batch", "low", "idle"),
        help="Fleet's dataset feed threads' CPU scheduling (DatasetBase.set_feed_priority), in "
        "the PS jobs and the single process; default: the library's",
    )
    parser.add_argument("--skip_peer", action="store_true", help="do not run Paddle")
    parser.add_argument(
        "--data_dir",
        default=os.path.join(ROOT, ".cache", "ctr_dnn"),
        help="where the generated data is cached",
    )
    parser.add_argument("--keep_logs", action="store_true", help="print and keep the log folder")
    args = parser.parse_args()
    args.rows = args.rows or (200_000 if args.quick else 400_000)
    args.test_rows = args.test_rows or (10_000 if args.quick else 50_000)
    args.rounds = args.rounds or (1 if args.quick else 3)
    if min(args.thread, args.servers, args.rounds, args.workers) < 1:
        parser.error("--thread, --servers, --workers and --rounds must be at least 1")
    data = prepare_data(args.data_dir, args.rows, args.test_rows, args.workers * args.thread)
    if args.reader == "multislot":
        data["dataset_files"], data["pipe"] = multislot_parts(data), "cat"
    else:
        data["dataset_files"] = data["parts"]
        data["pipe"] = python_pipe_command(
            os.path.join(EXAMPLE, "criteo_reader.py"),
            "--sparse_dim",
            criteo_reader.DEFAULT_SPARSE_DIM,
        )
    # The jobs' processes that outlive their launcher become this process's children, so that
    # their CPU time is counted (run_job).
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    # Logs stay behind when a job fails (the error names them), and with --keep_logs.
    scratch = tempfile.mkdtemp(prefix="fleet_ps_train_")
    if args.skip_peer:
        skipped = "Paddle peer skipped (--skip_peer)"
    elif not os.path.exists(PEER_PYTHON):
        skipped = "Paddle 2.6.2 peer not installed (bash benchmarks/peers/setup.sh 2.6.2)"
    else:
        skipped = ""
    rounds = [run_round(r, data, scratch, args, not skipped) for r in range(args.rounds)]
    fleet = {job: median_job([r["fleet"][job] for r in rounds]) for job in rounds[0]["fleet"]}
    if skipped:
        paddle: dict = {"skipped": skipped}
    else:
        paddle = {
            job: median_job([r["paddle"][job] for r in rounds]) for job in rounds[0]["paddle"]
        }
    result = build_result(args, data, fleet, paddle, rounds)
    if args.keep_logs:
        print(f"logs kept in {scratch}", flush=True)
    else:
        shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
