"""The reader glue of the config-driven trainers: file lists, feed dicts from a DataLoader
reader's samples, and the pipe_command PaddleRec's readers expect (the split of the files by
worker is fleet.util.get_file_shard's, tested with it; the jobs of test_trainers.py use it)."""

from __future__ import annotations

import shlex
import sys

import numpy as np
import pytest

import fleet
from fleet.rec import data
from fleet.rec.config import ConfigError, load_config

CONFIG = """\
runner:
  train_data_dir: "data"
  train_reader_path: "reader"
  train_batch_size: 2
  epochs: 1
  pipe_command: "python3.7 queue_reader.py --flag"
hyper_parameters:
  optimizer: {class: SGD, learning_rate: 0.1}
"""

READER = """\
import numpy as np

class RecDataset:
    def __init__(self, file_list, config):
        self.file_list = file_list

    def __iter__(self):
        for path in self.file_list:
            for line in open(path):
                ids = [int(v) for v in line.split()]
                yield [np.array(ids, dtype="int64"), np.array([len(ids) * 0.5], dtype="float32")]
"""


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "config.yaml").write_text(CONFIG)
    (tmp_path / "reader.py").write_text(READER)
    (tmp_path / "queue_reader.py").write_text("")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "b.txt").write_text("1 2\n3\n4 5 6\n")
    (tmp_path / "data" / "a.txt").write_text("7\n")
    (tmp_path / "data" / ".hidden").write_text("")
    return tmp_path


def test_data_files_are_sorted_without_hidden_ones(folder):
    config = load_config(str(folder / "config.yaml"))
    files = data.data_files(config, "runner.train_data_dir")
    assert files == [str(folder / "data" / "a.txt"), str(folder / "data" / "b.txt")]
    with pytest.raises(ConfigError, match=r"config\.yaml:.*runner\.test_data_dir: missing"):
        data.data_files(config, "runner.test_data_dir")


def test_batches_stack_samples_and_make_lod_tensors_of_uneven_ones(folder):
    config = load_config(str(folder / "config.yaml"))
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        ids = fleet.static.data("ids", [None, 1], "int64", lod_level=1)
        width = fleet.static.data("width", [None, 1], "float32")
    files = data.data_files(config, "runner.train_data_dir")
    batches = list(data.batches(config, "runner.train_reader_path", files, [ids, width], 2))
    assert len(batches) == 2  # 4 samples; a last short batch would be dropped
    first, second = batches
    lod = first["ids"]  # samples [7] and [1, 2]: uneven, so one LoD tensor
    assert np.array(lod).reshape(-1).tolist() == [7, 1, 2]
    assert lod.lod() == [[0, 1, 3]]
    np.testing.assert_allclose(first["width"], [[0.5], [1.0]])
    assert second["width"].shape == (2, 1)


def test_pipe_command_runs_the_folders_script_with_this_python(folder):
    config = load_config(str(folder / "config.yaml"))
    words = shlex.split(data.pipe_command(config))
    assert words[0].startswith("PYTHONPATH=")
    assert words[1:] == [
        sys.executable,
        str(folder / "queue_reader.py"),
        "--flag",
        str(folder / "config.yaml"),
        data.PIPE_UTILS_DIR,
    ]
