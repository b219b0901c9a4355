"""The README's main job: CTR-DNN on Criteo-format data, trained on parameter servers.

By default a local job launched through fleetrun: 2 servers and 2 workers in async mode
(--mode sync|async|half_async|geo picks another; --servers/--workers the shape), running
examples/ctr_dnn/train_ps.py. --single trains in one process instead (examples/ctr_dnn/train.py).

Without --train it generates data from the planted model (cached under .cache/ctr_dnn/ by
seed and size) and reports the learnt test AUC beside the teacher's oracle AUC. With
--train FILE... --test FILE it trains on your own Criteo files instead. Other flags are passed
to the training script (`python examples/ctr_dnn/train_ps.py --help`, or train.py's).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import train  # noqa: E402


def _generated(rows: int, test_rows: int, seed: int) -> tuple[list[str], str, float]:
    out = os.path.join(ROOT, ".cache", "ctr_dnn", f"seed{seed}_{rows}_{test_rows}")
    oracle_path = os.path.join(out, "oracle.json")
    if not os.path.isfile(oracle_path):
        print(
            f"[main job] generating {rows} training and {test_rows} test rows into {out}",
            flush=True,
        )
        subprocess.run(
            [
                sys.executable,
                os.path.join(HERE, "generate_data.py"),
                "--out",
                out,
                "--train_rows",
                str(rows),
                "--test_rows",
                str(test_rows),
                "--seed",
                str(seed),
            ],
            check=True,
        )
    with open(oracle_path) as f:
        oracle = json.load(f)["oracle_auc"]
    return [os.path.join(out, "train.txt")], os.path.join(out, "test.txt"), oracle


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--train", nargs="+", help="your Criteo training files")
    parser.add_argument("--test", help="your Criteo test file (with --train)")
    parser.add_argument("--rows", type=int, default=200_000, help="generated training rows")
    parser.add_argument("--test_rows", type=int, default=50_000, help="generated test rows")
    parser.add_argument("--data_seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument(
        "--single", action="store_true", help="train in one process (no parameter servers)"
    )
    parser.add_argument(
        "--mode",
        choices=("sync", "async", "half_async", "geo"),
        default="async",
        help="parameter-server mode",
    )
    parser.add_argument("--servers", type=int, default=2, help="parameter servers")
    parser.add_argument("--workers", type=int, default=2, help="workers")
    args, rest = parser.parse_known_args(argv)
    oracle = None
    if args.train:
        if not args.test:
            parser.error("--train needs --test")
        train_files, test_file = args.train, args.test
    else:
        train_files, test_file, oracle = _generated(args.rows, args.test_rows, args.data_seed)
    if oracle is not None:
        print(
            f"[main job] oracle_auc={oracle:.5f} (the planted teacher's own test AUC)", flush=True
        )
    script_args = [
        "--train",
        *train_files,
        "--test",
        test_file,
        "--epochs",
        str(args.epochs),
        *rest,
    ]
    if args.single:
        return train.main(script_args)
    command = [
        sys.executable,
        "-m",
        "fleet.launch",
        f"--server_num={args.servers}",
        f"--worker_num={args.workers}",
        os.path.join(HERE, "train_ps.py"),
        "--mode",
        args.mode,
        *script_args,
    ]
    print(
        f"[main job] {args.mode} parameter-server job: {args.servers} servers, "
        f"{args.workers} workers (fleetrun)",
        flush=True,
    )
    # Each worker uses one BLAS thread: the job's processes already share the cores.
    env = dict(os.environ, OPENBLAS_NUM_THREADS=os.environ.get("OPENBLAS_NUM_THREADS", "1"))
    summary: dict[str, str] = {}
    with subprocess.Popen(
        command,
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    ) as job:
        assert job.stdout is not None
        for line in job.stdout:
            print(line, end="", flush=True)
            for word in line.split():
                key, _, value = word.partition("=")
                if key in ("test_auc", "total_samples_per_sec") and value:
                    summary[key] = value
    if job.returncode != 0:
        return job.returncode
    # The job's result last, as the single-process job prints it.
    print(f"samples_per_sec={summary.get('total_samples_per_sec', 'nan')} (all workers)")
    print(f"test_auc={summary.get('test_auc', 'nan')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
