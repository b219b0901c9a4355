"""Benchmark: the MultiSlot data feed and train_from_dataset, against PaddlePaddle 3.3.1's on the
same files in the same run.

    .venv/bin/python benchmarks/data_feed.py [--quick]

Data: examples/ctr_dnn/generate_data.py rows, turned once into MultiSlot text files (dense_input
13 floats, C1..C26 one id each, label: criteo_reader.MULTISLOT_SLOTS), split into 4 files so two
reader threads have work. Measured for 1 and 2 threads, on both sides:
  - parse: InMemoryDataset.load_into_memory of every file (read + parse into memory), best of 2;
    MB/s of file bytes and samples/s;
  - train: one QueueDataset pass of train_from_dataset (pipe_command "cat") of CTR-DNN in its
    per-slot layout (examples/ctr_dnn/model.py; the peer builds the same network), batch 512;
    samples/s of the whole call.
The peer runs in its own venv (benchmarks/peers/setup.sh); without it the JSON says so.
The last line of output is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "ctr_dnn")
PEER_PYTHON = os.path.join(ROOT, ".venv-peers", "paddle", "bin", "python")
PEER_SCRIPT = os.path.join(ROOT, "benchmarks", "peers", "paddle_data_feed.py")
sys.path.insert(0, EXAMPLE)

import criteo_reader  # noqa: E402
import model  # noqa: E402

import fleet  # noqa: E402

THREADS = (1, 2)
PARTS = 4
BATCH = 512


def multislot_files(rows: int) -> list[str]:
    """MultiSlot files of `rows` generated samples (cached under .cache/data_feed)."""
    out = os.path.join(ROOT, ".cache", "data_feed", f"rows{rows}")
    files = [os.path.join(out, f"part-{p}") for p in range(PARTS)]
    if all(os.path.isfile(f) for f in files):
        return files
    os.makedirs(out, exist_ok=True)
    subprocess.run(
        [
            sys.executable,
            os.path.join(EXAMPLE, "generate_data.py"),
            "--out",
            out,
            "--train_rows",
            str(rows),
            "--test_rows",
            "1000",
            "--seed",
            "7",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    data = criteo_reader.read_criteo(os.path.join(out, "train.txt"))
    dense = np.char.mod("%.6g", data.dense)
    sparse = np.char.add("1 ", data.sparse.astype(str))
    for p, path in enumerate(files):
        with open(path + ".tmp", "w", encoding="ascii") as f:
            for i in range(p, len(data), PARTS):
                f.write(f"13 {' '.join(dense[i])} {' '.join(sparse[i])} 1 {data.label[i, 0]}\n")
        os.replace(path + ".tmp", path)
    return files


def fleet_dataset(kind: str, net: model.CtrDnn, files: list[str], threads: int):
    block = net.main.global_block()
    dataset = fleet.DatasetFactory().create_dataset(kind)
    dataset.set_use_var([block.var(name) for name in criteo_reader.MULTISLOT_SLOTS])
    dataset.set_batch_size(BATCH)
    dataset.set_thread(threads)
    dataset.set_filelist(files)
    return dataset


def measure_fleet(files: list[str]) -> dict:
    net = model.build(model.ModelConfig(layout="slots"))
    exe = fleet.Executor(fleet.CPUPlace())
    exe.run(net.startup)
    result: dict = {"parse": {}, "train": {}}
    for threads in THREADS:
        best, samples = float("inf"), 0
        for _ in range(2):
            dataset = fleet_dataset("InMemoryDataset", net, files, threads)
            start = time.perf_counter()
            dataset.load_into_memory()
            best = min(best, time.perf_counter() - start)
            samples = dataset.get_memory_data_size()
            dataset.release_memory()
        result["parse"][str(threads)] = {"seconds": best, "samples": samples}
    for threads in THREADS:
        dataset = fleet_dataset("QueueDataset", net, files, threads)
        start = time.perf_counter()
        exe.train_from_dataset(net.main, dataset, thread=threads, print_period=0)
        result["train"][str(threads)] = {"seconds": time.perf_counter() - start}
    return result


def measure_peer(files: list[str]) -> dict | None:
    if not os.path.isfile(PEER_PYTHON):
        return None
    merged: dict = {"parse": {}, "train": {}}
    for threads in THREADS:  # one process per thread count (see the peer's --threads)
        # In a scratch folder: Paddle's train_from_dataset writes <id>_train_desc.prototxt there.
        with tempfile.TemporaryDirectory(prefix="paddle_data_feed_") as scratch:
            proc = subprocess.run(
                [
                    PEER_PYTHON,
                    PEER_SCRIPT,
                    "--files",
                    *files,
                    "--threads",
                    str(threads),
                    "--batch_size",
                    str(BATCH),
                ],
                capture_output=True,
                text=True,
                timeout=1800,
                cwd=scratch,
            )
        if proc.returncode != 0:
            raise SystemExit(f"peer failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        one = json.loads(proc.stdout.strip().splitlines()[-1])
        merged["paddle"] = one["paddle"]
        merged["parse"].update(one["parse"])
        merged["train"].update(one["train"])
    return merged


def rates(raw: dict, samples: int, megabytes: float) -> dict:
    out = {}
    for threads in THREADS:
        t = str(threads)
        parse_s, train_s = raw["parse"][t]["seconds"], raw["train"][t]["seconds"]
        out[t] = {
            "parse_mb_per_s": round(megabytes / parse_s, 1),
            "parse_samples_per_s": round(samples / parse_s),
            "train_samples_per_s": round(samples / train_s),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="less data (under a minute)")
    parser.add_argument(
        "--rows", type=int, default=0, help="generated samples (default 200k; --quick 30k)"
    )
    args = parser.parse_args()
    rows = args.rows or (30_000 if args.quick else 200_000)
    files = multislot_files(rows)
    megabytes = sum(os.path.getsize(f) for f in files) / 2**20
    result: dict = {
        "benchmark": "data_feed",
        "quick": args.quick,
        "rows": rows,
        "files": len(files),
        "megabytes": round(megabytes, 1),
        "batch": BATCH,
        "loadavg_1min": os.getloadavg()[0],
    }
    fleet_raw = measure_fleet(files)
    ours = rates(fleet_raw, rows, megabytes)
    result["fleet"] = ours
    result["thread_scaling"] = round(
        ours["2"]["train_samples_per_s"] / ours["1"]["train_samples_per_s"], 3
    )
    for t in ours:
        print(
            f"fleet  {t} thread(s): parse {ours[t]['parse_mb_per_s']} MB/s "
            f"({ours[t]['parse_samples_per_s']} samples/s), train "
            f"{ours[t]['train_samples_per_s']} samples/s",
            file=sys.stderr,
        )
    peer_raw = measure_peer(files)
    if peer_raw is None:
        result["peer"] = f"skipped: no peer venv at {PEER_PYTHON} (bash benchmarks/peers/setup.sh)"
    else:
        peer = rates(peer_raw, rows, megabytes)
        result["peer"] = f"paddlepaddle {peer_raw['paddle']}"
        result["paddle"] = peer
        for t in peer:
            print(
                f"paddle {t} thread(s): parse {peer[t]['parse_mb_per_s']} MB/s "
                f"({peer[t]['parse_samples_per_s']} samples/s), train "
                f"{peer[t]['train_samples_per_s']} samples/s",
                file=sys.stderr,
            )
        parse = {
            t: round(ours[t]["parse_samples_per_s"] / peer[t]["parse_samples_per_s"], 3)
            for t in ours
        }
        train = {
            t: round(ours[t]["train_samples_per_s"] / peer[t]["train_samples_per_s"], 3)
            for t in ours
        }
        result["parse_ratio_vs_paddle_by_threads"] = parse
        result["train_ratio_vs_paddle_by_threads"] = train
        # Headlines: the least favourable thread count.
        result["parse_ratio_vs_paddle"] = min(parse.values())
        result["train_ratio_vs_paddle"] = min(train.values())
        result["paddle_thread_scaling"] = round(
            peer["2"]["train_samples_per_s"] / peer["1"]["train_samples_per_s"], 3
        )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
