"""examples/word2vec/train.py --train_files: the files that replace the prepared parts must be
one per part, in order, and exist; anything else stops the job naming what is wrong."""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import sys

import pytest

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "examples" / "word2vec"


@pytest.fixture(scope="module")
def train_module():
    # The example puts its folder on sys.path and imports modules by plain names (reader,
    # model, ...) that other examples use too: both are undone afterwards, so that another
    # test in this process imports its own example's modules.
    path, modules = list(sys.path), set(sys.modules)
    try:
        spec = importlib.util.spec_from_file_location("w2v_train", EXAMPLE / "train.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path[:] = path
        examples = str(EXAMPLE.parent)
        for name in set(sys.modules) - modules:
            if (getattr(sys.modules[name], "__file__", None) or "").startswith(examples):
                del sys.modules[name]


META = {"train_files": ["train-0000.txt", "train-0001.txt"]}


def test_the_prepared_parts_are_used_without_train_files(train_module, tmp_path):
    args = argparse.Namespace(data=str(tmp_path), train_files=None)
    assert train_module.training_files(args, META) == [
        str(tmp_path / "train-0000.txt"),
        str(tmp_path / "train-0001.txt"),
    ]


def test_train_files_replace_the_parts_one_for_one(train_module, tmp_path):
    files = [tmp_path / "a.multislot", tmp_path / "b.multislot"]
    for f in files:
        f.write_text("1 3 6 1 2 3 4 5 6\n")
    args = argparse.Namespace(data=str(tmp_path), train_files=[str(f) for f in files])
    assert train_module.training_files(args, META) == [str(f) for f in files]


def test_a_count_other_than_the_parts_names_both_counts(train_module, tmp_path):
    one = tmp_path / "a.multislot"
    one.write_text("")
    args = argparse.Namespace(data=str(tmp_path), train_files=[str(one)])
    with pytest.raises(SystemExit, match="1 files for the 2 training parts"):
        train_module.training_files(args, META)


def test_a_missing_file_is_named(train_module, tmp_path):
    present = tmp_path / "a.multislot"
    present.write_text("")
    missing = tmp_path / "gone.multislot"
    args = argparse.Namespace(data=str(tmp_path), train_files=[str(present), str(missing)])
    with pytest.raises(SystemExit, match="gone.multislot does not exist"):
        train_module.training_files(args, META)
