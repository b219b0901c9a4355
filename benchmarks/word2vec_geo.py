"""Benchmark: word2vec (examples/word2vec) on parameter servers in async against GEO with
update_frequency 100 and 400, the same job otherwise.

    .venv/bin/python benchmarks/word2vec_geo.py [--quick] [--max_words N]

Job: a slice of the shared public-domain corpus (../shared/data/text_corpus; --max_words corpus
words, default 1M, --quick 300k), one epoch, fleetrun with 1 server and 2 workers on this
machine, one trainer thread per worker, dim 64, 5 negatives, Adagrad 0.2. Per mode: the job's
training words/s (training words of all workers over the longest worker's training time) and the
held-out AUC printed by worker 0. ``geo_vs_async`` is GEO's words/s over async's (k = 100 and
400); the issue's target is >= 2.0. The peer ratio against PaddlePaddle 3.3.1's PS word2vec
(``geo_ratio_vs_paddle``) is not measured: no Paddle word2vec peer script exists yet, and the JSON
says so. The last line of output is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "word2vec")
CORPUS = os.path.join(os.path.dirname(ROOT), "shared", "data", "text_corpus")


def _value(output: str, key: str) -> float:
    found = re.findall(rf"{key}=([0-9.]+)", output)
    if not found:
        raise RuntimeError(f"no {key}= in the job's output:\n{output[-3000:]}")
    return float(found[-1])


def run_job(data: str, mode: str, update_frequency: int, timeout: float) -> dict:
    env = dict(os.environ, PYTHONPATH=ROOT, OPENBLAS_NUM_THREADS="1")
    command = [
        sys.executable,
        "-m",
        "fleet.launch",
        "--server_num=1",
        "--worker_num=2",
        os.path.join(EXAMPLE, "train.py"),
        "--data",
        data,
        "--mode",
        mode,
        "--update_frequency",
        str(update_frequency),
        "--print_period",
        "1000000",
        "--probes",
        "0",
    ]
    result = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )
    out = result.stdout + result.stderr
    if result.returncode != 0:
        raise RuntimeError(f"{mode} job failed ({result.returncode}):\n{out[-3000:]}")
    return {
        "words_per_sec": _value(out, "words_per_sec"),
        "heldout_auc": _value(out, "heldout_auc"),
        "total_words": _value(out, "total_words"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="300k corpus words")
    parser.add_argument("--max_words", type=int, default=0)
    parser.add_argument("--corpus", default=CORPUS)
    args = parser.parse_args()
    if not os.path.isdir(args.corpus):
        print(
            f"error: corpus folder {args.corpus} is absent (see shared/data/README.md)",
            file=sys.stderr,
        )
        return 2
    max_words = args.max_words or (300_000 if args.quick else 1_000_000)
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
                "2",
            ],
            check=True,
            capture_output=True,
            timeout=300,
            env=dict(os.environ, PYTHONPATH=ROOT),
        )
        runs = {}
        for name, mode, k in (
            ("async", "async", 0),
            ("geo_100", "geo", 100),
            ("geo_400", "geo", 400),
        ):
            runs[name] = run_job(data, mode, k or 100, timeout=1200)
            print(f"{name}: {runs[name]}", flush=True)
    base = runs["async"]["words_per_sec"]
    result = {
        "job": f"{max_words} corpus words, 1 epoch, fleetrun 1 server 2 workers, dim 64",
        "runs": runs,
        "geo_vs_async": {k: runs[f"geo_{k}"]["words_per_sec"] / base for k in (100, 400)},
        "heldout_auc": {name: run["heldout_auc"] for name, run in runs.items()},
        "geo_vs_async_target": 2.0,
        "geo_ratio_vs_paddle": None,
        "geo_ratio_vs_paddle_note": "not measured: no PaddlePaddle PS word2vec peer script yet",
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
