"""PaddleRec 1.7's word2vec (skip-gram, negatives drawn by its pipe_command reader, the input,
output and bias tables is_sparse, SGD on an exponentially decayed rate) ported by imports only:
trained in one process and as an async parameter-server job through fleetrun on the sentences
of a planted topic model, exported, and scored on held-out sentences. It learns when held-out
context words score above random words (pair AUC; chance is 0.5)."""

from __future__ import annotations

import json
import pathlib
import shutil

import numpy as np

from tests.python.compat import jobs

SCRIPTS = pathlib.Path(__file__).parent / "scripts" / "word2vec_1x"
TOPICS, TOPIC_WORDS, SENTENCE_WORDS = 20, 10, 12
DICT_SIZE = TOPICS * TOPIC_WORDS
NEG_NUM, WINDOW = 5, 5
# Words of one sentence share a topic, so a context word is one of 10 of the 200 words; a
# trained model ranks it above a random word almost always (seen: 0.98 after 2 epochs in one
# process and in the async job). An untrained one (output vectors at zero) is at most 0.5.
LEARNED_AUC = 0.85


def _sentences(rng: np.random.Generator, count: int) -> np.ndarray:
    topic = rng.integers(0, TOPICS, count)
    return topic[:, None] * TOPIC_WORDS + rng.integers(0, TOPIC_WORDS, (count, SENTENCE_WORDS))


def _write_data(folder: pathlib.Path) -> dict[str, str]:
    """Two training files of word-id lines, the dict file ("id count" lines, the reader's
    negative-sampling weights) and held-out samples with uniformly drawn negatives."""
    rng = np.random.default_rng(11)
    folder.mkdir()
    train = []
    counts = np.zeros(DICT_SIZE, np.int64)
    for part in range(2):
        sentences = _sentences(rng, 400)
        np.add.at(counts, sentences.ravel(), 1)
        path = folder / f"part-{part}"
        path.write_text("".join(" ".join(map(str, s)) + "\n" for s in sentences))
        train.append(str(path))
    (folder / "dict.txt").write_text("".join(f"{i} {max(c, 1)}\n" for i, c in enumerate(counts)))
    held_out = _sentences(rng, 200)
    centre = held_out[:, 0]
    context = held_out[np.arange(len(held_out)), rng.integers(1, SENTENCE_WORDS, len(held_out))]
    np.savez(
        folder / "held_out.npz",
        input_word=centre.reshape(-1, 1).astype(np.int64),
        true_label=context.reshape(-1, 1).astype(np.int64),
        neg_label=rng.integers(0, DICT_SIZE, (len(held_out), NEG_NUM)).astype(np.int64),
    )
    return {
        "train": ",".join(train),
        "dict": str(folder / "dict.txt"),
        "held_out": str(folder / "held_out.npz"),
    }


def _prepare(tmp_path: pathlib.Path) -> tuple[pathlib.Path, dict[str, str]]:
    folder = tmp_path / "word2vec"
    shutil.copytree(SCRIPTS, folder)
    return folder, _write_data(tmp_path / "data")


def _pair_auc(folder: pathlib.Path, model_dir: pathlib.Path, held_out: str) -> dict:
    result = jobs.run_script(folder / "infer.py", str(model_dir), held_out)
    assert result.returncode == 0, jobs.explain(result, folder)
    return json.loads((folder / "infer.json").read_text())


def test_paddlerec_word2vec_trains_in_one_process(tmp_path):
    folder, data = _prepare(tmp_path)
    model_dir = tmp_path / "model"
    result = jobs.run_script(
        folder / "local_train.py",
        data["train"],
        data["dict"],
        str(DICT_SIZE),
        str(model_dir),
        timeout=240,
    )
    assert result.returncode == 0, jobs.explain(result, folder)
    infer = _pair_auc(folder, model_dir, data["held_out"])
    assert infer["pairs"] == 200
    assert infer["pair_auc"] > LEARNED_AUC, infer


def test_paddlerec_word2vec_trains_as_an_async_parameter_server_job(tmp_path):
    """fleetrun, 1 server and 2 workers; the servers step the decayed learning rate; the first
    worker alone exports the model, which one process then scores."""
    folder, data = _prepare(tmp_path)
    model_dir = tmp_path / "model"
    result = jobs.fleetrun(
        folder / "fleet_train.py",
        ["--server_num=1", "--worker_num=2"],
        data["train"],
        data["dict"],
        str(DICT_SIZE),
        str(model_dir),
        timeout=240,
    )
    assert result.returncode == 0, jobs.explain(result, folder)
    assert sorted(jobs.results(folder, "train")) == ["0", "1"]
    infer = _pair_auc(folder, model_dir, data["held_out"])
    assert infer["pair_auc"] > LEARNED_AUC, infer
