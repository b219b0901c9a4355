"""Benchmark: word2vec (examples/word2vec) on parameter servers in async against GEO with
update_frequency 100 and 400, the same job otherwise, and PaddlePaddle 2.6.2's parameter server
on the same data as the peer.

    .venv/bin/python benchmarks/word2vec_geo.py [--quick] [--max_words N] [--skip_peer]

Job: a slice of the shared public-domain corpus (../shared/data/text_corpus; --max_words corpus
words, default 1M, --quick 300k), one epoch, 1 server and 2 workers on this machine, one trainer
thread per worker, dim 64, 5 negatives, batch 256, Adagrad 0.2 (the example's defaults). Paddle's
parameter server takes only SGD or Adam, so the peer comparison runs both sides with SGD 6.4
(word2vec.c's 0.025 per sample times the batch of 256, as the loss is a batch mean; 300k words,
one process: held-out AUC 0.53 at 2.0, 0.59 at 6.0, 0.60 at 12): Fleet's jobs ``async_sgd`` and
``geo_100_sgd`` against Paddle's ``async`` and ``geo_100``.

Data (--reader samples, the default): the training samples are drawn once from the corpus parts
by examples/word2vec/reader.py (subsampling, windows, negatives) into MultiSlot files, and both
sides read those through ``cat``, so that neither spends its CPU in the Python reader and both
train on the same samples. --reader pipe measures Fleet's jobs as the example runs them, the
reader as the pipe_command (no peer then: Paddle cannot run Fleet's reader).

Per job: training words/s (corpus words of all workers' parts over the longest worker's
training time) and the held-out AUC worker 0 prints (the same held-out pairs on both sides).

JSON keys: ``geo_vs_async`` (Fleet GEO words/s over Fleet async, k = 100 and 400; target
>= 2.0); ``geo_ratio_vs_paddle`` (Fleet GEO k = 100 over Paddle GEO k = 100; target >= 1.5);
``async_ratio_vs_paddle``; the AUCs. The issue names PaddlePaddle 3.3.1 as the peer, but its
CPU wheel has no parameter-server core (benchmarks/peers/setup.sh), so the peer is 2.6.2
(.venv-peers/paddle26, benchmarks/peers/paddle_ps_word2vec.py). The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "word2vec")
CORPUS = os.path.join(os.path.dirname(ROOT), "shared", "data", "text_corpus")
PEER_PYTHON = os.path.join(ROOT, ".venv-peers", "paddle26", "bin", "python")
PEER_SCRIPT = os.path.join(ROOT, "benchmarks", "peers", "paddle_ps_word2vec.py")
WORKERS, JOB_TIMEOUT_S = 2, 1200
ADAGRAD, SGD = ("adagrad", "0.2"), ("sgd", "6.4")
JOBS = (
    ("async", "async", 100, ADAGRAD),
    ("geo_100", "geo", 100, ADAGRAD),
    ("geo_400", "geo", 400, ADAGRAD),
)
PEER_JOBS = (("async", "async", 100), ("geo_100", "geo", 100))  # each also run by Fleet, SGD

sys.path.insert(0, EXAMPLE)
import corpus  # noqa: E402
import numpy as np  # noqa: E402
import train as w2v_train  # noqa: E402
from job_runner import paddle_ps_launch, run_in_session, tail  # noqa: E402


def _value(output: str, key: str) -> float:
    found = re.findall(rf"{key}=([0-9.]+)", output)
    if not found:
        raise RuntimeError(f"no {key}= in the job's output:\n{output[-3000:]}")
    return float(found[-1])


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=ROOT, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")


def draw_samples(data: str, meta: dict) -> list[str]:
    """Each training part's samples, drawn once by reader.py into part.multislot beside it."""
    out = []
    for name in meta["train_files"]:
        part = os.path.join(data, name)
        with open(part, "rb") as src, open(part + ".multislot", "wb") as dst:
            subprocess.run(
                [
                    sys.executable,
                    os.path.join(EXAMPLE, "reader.py"),
                    "--vocab",
                    os.path.join(data, "vocab.txt"),
                    "--seed",
                    "1",
                ],
                stdin=src,
                stdout=dst,
                check=True,
                env=_env(),
                timeout=600,
            )
        out.append(part + ".multislot")
    return out


def run_fleet(
    data: str,
    mode: str,
    k: int,
    optimizer: tuple[str, str],
    samples: list[str] | None,
    scratch: str,
) -> dict:
    command = [
        sys.executable,
        "-m",
        "fleet.launch",
        "--server_num=1",
        f"--worker_num={WORKERS}",
        os.path.join(EXAMPLE, "train.py"),
        "--data",
        data,
        "--mode",
        mode,
        "--update_frequency",
        str(k),
        "--print_period",
        "1000000",
        "--probes",
        "0",
        "--optimizer",
        optimizer[0],
        "--learning_rate",
        optimizer[1],
    ]
    if samples:
        command += ["--pipe_command", "cat", "--train_files", *samples]
    log = os.path.join(scratch, f"fleet_{mode}_{k}_{optimizer[0]}.log")
    rc, _ = run_in_session(command, log, _env(), ROOT, JOB_TIMEOUT_S)
    out = tail(log, 10**7)
    if rc != 0:
        raise RuntimeError(f"Fleet {mode} job failed ({rc}):\n{out[-3000:]}")
    return {
        "words_per_sec": _value(out, "words_per_sec"),
        "heldout_auc": _value(out, "heldout_auc"),
        "total_words": _value(out, "total_words"),
    }


def run_paddle(
    mode: str, k: int, samples: list[str], heldout: str, meta: dict, scratch: str, timeout: float
) -> dict:
    """Paddle 2.6.2's job (SGD); its words/s from the same corpus word counts as Fleet's.
    A bounded timeout: Paddle's workers wait for a server that died without end."""
    out_dir = os.path.join(scratch, f"paddle_{mode}_{k}")
    os.makedirs(out_dir)
    script_args = [
        PEER_SCRIPT,
        "--mode",
        mode,
        "--k_steps",
        str(k),
        "--train_files",
        *samples,
        "--heldout",
        heldout,
        "--vocab_size",
        str(meta["vocab_size"]),
        "--out_dir",
        out_dir,
        "--optimizer",
        SGD[0],
        "--learning_rate",
        SGD[1],
    ]
    command = paddle_ps_launch(PEER_PYTHON, WORKERS, os.path.join(out_dir, "log"), script_args)
    env = dict(os.environ, PADDLE_WITH_GLOO="1")
    env.pop("PYTHONPATH", None)
    launcher_log = os.path.join(out_dir, "launcher.log")
    # In its own folder: Paddle writes train_desc files into the cwd.
    rc, _ = run_in_session(command, launcher_log, env, out_dir, timeout)
    results = []
    for path in sorted(glob.glob(os.path.join(out_dir, "worker*.json"))):
        with open(path) as f:
            results.append(json.load(f))
    if rc != 0 or len(results) != WORKERS:  # the launcher exits 0 when its workers crash
        logs = "".join(tail(p, 2000) for p in glob.glob(os.path.join(out_dir, "log", "*")))
        return {"failed": f"exit {rc}, {len(results)} of {WORKERS} workers reported: {logs}"}
    words_per_file = meta["train_tokens"] / len(meta["train_files"])
    longest = max(r["seconds"] for r in results)
    auc = [r["heldout_auc"] for r in results if "heldout_auc" in r]
    return {
        "words_per_sec": words_per_file * len(samples) / longest,
        "heldout_auc": auc[0],
        "version": results[0]["paddle_version"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="300k corpus words")
    parser.add_argument("--max_words", type=int, default=0)
    parser.add_argument("--corpus", default=CORPUS)
    parser.add_argument("--reader", choices=("samples", "pipe"), default="samples")
    parser.add_argument("--skip_peer", action="store_true", help="do not run PaddlePaddle")
    args = parser.parse_args()
    if not os.path.isdir(args.corpus):
        print(
            f"error: corpus folder {args.corpus} is absent (see shared/data/README.md)",
            file=sys.stderr,
        )
        return 2
    max_words = args.max_words or (300_000 if args.quick else 1_000_000)
    peer_note = None
    if args.skip_peer:
        peer_note = "peer skipped (--skip_peer)"
    elif args.reader == "pipe":
        peer_note = "peer not run with --reader pipe (Paddle cannot run Fleet's reader)"
    elif not os.path.exists(PEER_PYTHON):
        peer_note = f"peer not installed ({PEER_PYTHON}; bash benchmarks/peers/setup.sh 2.6.2)"
    with tempfile.TemporaryDirectory(prefix="w2v_bench_") as tmp:
        data = os.path.join(tmp, "data")
        subprocess.run(
            [
                sys.executable,
                os.path.join(EXAMPLE, "corpus.py"),
                "--corpus",
                args.corpus,
                "--out",
                data,
                "--max_words",
                str(max_words),
                "--parts",
                str(WORKERS),
            ],
            check=True,
            capture_output=True,
            timeout=300,
            env=_env(),
        )
        meta = corpus.load_meta(data)
        _, counts = corpus.read_vocab(os.path.join(data, "vocab.txt"))
        meta["vocab_size"] = len(counts)
        samples = draw_samples(data, meta) if args.reader == "samples" else None
        runs = {}
        jobs = list(JOBS)
        if peer_note is None:
            jobs += [(f"{name}_sgd", mode, k, SGD) for name, mode, k in PEER_JOBS]
        for name, mode, k, optimizer in jobs:
            runs[name] = run_fleet(data, mode, k, optimizer, samples, tmp)
            print(f"fleet {name}: {runs[name]}", flush=True)
        peer = {}
        if peer_note is None:
            centre, targets = w2v_train.heldout_pairs(data, counts, 5, 5, 1e-3, 20000)
            heldout = os.path.join(tmp, "heldout.npz")
            np.savez(heldout, centre=centre, targets=targets)
            timeout = 300 if args.quick else 900
            for name, mode, k in PEER_JOBS:
                peer[name] = run_paddle(mode, k, samples, heldout, meta, tmp, timeout)
                print(f"paddle {name}: {peer[name]}", flush=True)
    base = runs["async"]["words_per_sec"]

    def ratio(name: str) -> float | None:
        if "words_per_sec" not in peer.get(name, {}):
            return None
        return round(runs[f"{name}_sgd"]["words_per_sec"] / peer[name]["words_per_sec"], 3)

    result = {
        "job": f"{max_words} corpus words, 1 epoch, 1 server {WORKERS} workers, dim 64, "
        f"reader {args.reader}",
        "runs": runs,
        "geo_vs_async": {k: round(runs[f"geo_{k}"]["words_per_sec"] / base, 3) for k in (100, 400)},
        "geo_vs_async_target": 2.0,
        "heldout_auc": {name: run["heldout_auc"] for name, run in runs.items()},
        "geo_ratio_vs_paddle": ratio("geo_100"),
        "async_ratio_vs_paddle": ratio("async"),
        "geo_ratio_vs_paddle_target": 1.5,
        "paddle_runs": peer,
        "paddle_heldout_auc": {n: r.get("heldout_auc") for n, r in peer.items()},
    }
    if peer_note:
        result["peer_note"] = peer_note
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
