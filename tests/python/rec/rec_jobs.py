"""Helpers for the config-driven trainer tests: copies of model folders in a temporary
directory (so that saved models land there), a PaddleRec-style data set with a planted signal
for the user's model folder, and runs of the trainers as real processes, alone or through
fleetrun on 127.0.0.1."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np

REPO_ROOT = pathlib.Path(__file__).resolve().parents[3]
MODELS = REPO_ROOT / "models"
USER_MODEL = pathlib.Path(__file__).resolve().parent / "user_model"
JOB_TIMEOUT_S = 240

_EPOCH_LINE = re.compile(r"epoch: (\d+) done, (.*?), samples: (\d+)")


def shipped_model(tmp: pathlib.Path, name: str) -> pathlib.Path:
    """A copy of models/rank/<name> (with the shared sample data beside it) or of
    models/recall/word2vec; its config.yaml."""
    if name == "word2vec":
        shutil.copytree(MODELS / "recall" / name, tmp / "recall" / name)
        return tmp / "recall" / name / "config.yaml"
    shutil.copytree(MODELS / "rank" / "sample_data", tmp / "rank" / "sample_data")
    if name != "dnn":  # the other rank models read with dnn's reader
        shutil.copytree(MODELS / "rank" / "dnn", tmp / "rank" / "dnn")
    shutil.copytree(MODELS / "rank" / name, tmp / "rank" / name, dirs_exist_ok=True)
    return tmp / "rank" / name / "config.yaml"


def user_model(tmp: pathlib.Path, seed: int = 0) -> pathlib.Path:
    """A copy of the user's model folder with its data written: two training files of 600 rows
    and a test file of 300, in PaddleRec's slot format, labels drawn from a planted logistic
    model of the 3 dense features and 4 slots of 64 ids. Returns its config.yaml."""
    folder = tmp / "user_model"
    shutil.copytree(USER_MODEL, folder)
    rng = np.random.default_rng(seed)
    id_weight = rng.normal(0.0, 1.5, size=(4, 64))
    dense_weight = np.array([1.5, -1.0, 0.8])
    for name, rows in (("train/part-0", 600), ("train/part-1", 600), ("test/part-0", 300)):
        path = folder / "data" / f"{name}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        dense = rng.normal(size=(rows, 3))
        ids = rng.integers(0, 64, size=(rows, 4))
        logit = dense @ dense_weight + id_weight[np.arange(4), ids].sum(axis=1)
        labels = rng.random(rows) < 1.0 / (1.0 + np.exp(-logit))
        with open(path, "w") as f:
            for r in range(rows):
                fields = [f"click:{int(labels[r])}"]
                fields += [f"dense_feature:{v:.4f}" for v in dense[r]]
                fields += [f"{s + 1}:{ids[r, s]}" for s in range(4)]
                f.write(" ".join(fields) + "\n")
    return folder / "config.yaml"


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), OPENBLAS_NUM_THREADS="1")
    for name in ("FLEET_GLOO_STORE_ENDPOINT", "FLEET_GLOO_STORE_PATH", "FLEET_JOB_ID"):
        env.pop(name, None)
    return env


def run_module(
    cwd: pathlib.Path, module: str, config: pathlib.Path, *overrides: str
) -> subprocess.CompletedProcess:
    """`python -m <module> -m config [-o overrides]` in `cwd`."""
    command = [sys.executable, "-m", module, "-m", str(config)]
    if overrides:
        command += ["-o", *overrides]
    return subprocess.run(
        command, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=JOB_TIMEOUT_S
    )


def run_fleetrun(
    cwd: pathlib.Path,
    options: list[str],
    module: str,
    config: pathlib.Path,
    *overrides: str,
) -> subprocess.CompletedProcess:
    """`fleetrun <options> --module <module> -m config [-o overrides]` in `cwd`, its processes'
    logs under cwd/logs."""
    command = [
        sys.executable,
        "-m",
        "fleet.launch",
        f"--log_dir={cwd / 'logs'}",
        *options,
        "--module",
        module,
        "-m",
        str(config),
    ]
    if overrides:
        command += ["-o", *overrides]
    return subprocess.run(
        command, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=JOB_TIMEOUT_S
    )


def logs(cwd: pathlib.Path) -> str:
    """Every process log of a fleetrun job, concatenated."""
    return "\n".join(p.read_text() for p in sorted((cwd / "logs").glob("*")) if p.is_file())


def epoch_metrics(output: str) -> list[dict[str, float]]:
    """The metrics of every `epoch: E done, name: value, ...` line, in order."""
    found = []
    for match in _EPOCH_LINE.finditer(output):
        values = {"epoch": float(match.group(1)), "samples": float(match.group(3))}
        for part in match.group(2).split(", "):
            key, _, value = part.partition(": ")
            values[key] = float(value)
        found.append(values)
    return found


RANK_FEEDS = ["label"] + [f"C{i}" for i in range(1, 27)] + ["dense_input"]


def roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney U, tied scores at their mean rank)."""
    labels, scores = np.asarray(labels).ravel(), np.asarray(scores, dtype=np.float64).ravel()
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    for value in np.unique(scores):  # mean ranks of ties
        tied = scores == value
        ranks[tied] = ranks[tied].mean()
    positives = labels == 1
    n_pos, n_neg = int(positives.sum()), int((~positives).sum())
    return float((ranks[positives].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def rank_model_test_auc(tmp: pathlib.Path, exported: pathlib.Path, config: pathlib.Path) -> float:
    """The test AUC of an exported rank model (rec_inference) on the sample test file, read
    with dnn's reader, predictions from fleet.load_inference_model's program."""
    import fleet
    from fleet.rec.config import load_config

    loaded = load_config(str(config))
    # Loaded from its file under a name of its own: a plain `import criteo_reader` would return
    # examples/ctr_dnn's reader when another test of this pytest worker imported that one first.
    spec = importlib.util.spec_from_file_location(
        "rec_jobs_dnn_criteo_reader", tmp / "rank" / "dnn" / "criteo_reader.py"
    )
    criteo_reader = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(criteo_reader)
    test_dir = tmp / "rank" / "sample_data" / "test"
    samples = list(criteo_reader.RecDataset(sorted(map(str, test_dir.iterdir())), loaded))
    exe = fleet.Executor(fleet.CPUPlace())
    program, feed_names, fetches = fleet.load_inference_model(str(exported), exe)
    columns = {name: i for i, name in enumerate(RANK_FEEDS)}
    feed = {
        name: np.stack([s[columns[name]] for s in samples]).reshape(len(samples), -1)
        for name in feed_names
    }
    (predict,) = exe.run(program, feed=feed, fetch_list=fetches)
    labels = np.array([s[0][0] for s in samples])
    return roc_auc(labels, np.asarray(predict)[:, -1])
