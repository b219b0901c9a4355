"""The readers of a PaddleRec config, as its trainers build them.

* `reader_type: DataLoader` (the default): `train_reader_path` names a Python module in the
  model folder with a `RecDataset(file_list, config)` class whose iteration yields samples, each a
  list of NumPy arrays in the order of the model's `create_feeds()`; `batches()` groups them into
  feed dicts of `train_batch_size` samples (the last, short batch is dropped, as PaddleRec's
  DataLoader does).
* `reader_type: QueueDataset` / `InmemoryDataset`: every file is piped through `pipe_command`
  (a MultiSlotDataGenerator script, e.g. `python queuedataset_reader.py`) with the config's path
  and the folder of PaddleRec's `common` helpers appended, as PaddleRec does; `python` at the
  head of the command is this interpreter, with this `fleet` importable.

`split_file_list: True` gives each worker its share of the files (fleet.util.get_file_shard).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import sys
from types import ModuleType
from typing import Any, Iterator, Sequence

import numpy as np

import fleet
from fleet import dataset as fleet_dataset
from fleet._dtypes import dtype_name
from fleet.errors import InvalidArgument, NotFound
from fleet.executor import LoDTensor
from fleet.framework import Variable
from fleet.rec.config import Config, ConfigError

PIPE_UTILS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pipe_utils")
_PYTHON_WORD = re.compile(r"^python[0-9.]*$")


def data_files(config: Config, key: str) -> list[str]:
    """The files of the folder `key` names (sorted, hidden files left out)."""
    folder = config.get(key)
    if not folder:
        raise ConfigError(f"{config.where(key)}: {key}: missing; the trainer needs a data folder")
    if os.path.isfile(folder):
        return [folder]
    if not os.path.isdir(folder):
        raise ConfigError(f"{config.where(key)}: {key}: no such folder {folder}")
    files = sorted(
        os.path.join(folder, name)
        for name in os.listdir(folder)
        if not name.startswith(".") and os.path.isfile(os.path.join(folder, name))
    )
    if not files:
        raise ConfigError(f"{config.where(key)}: {key}: {folder} holds no file")
    return files


def worker_files(config: Config, index: int, count: int) -> list[str]:
    """The training files of worker `index` of `count`: all of them, or with
    runner.split_file_list its share by fleet.util.get_file_shard (PaddleRec's split:
    contiguous blocks, the first workers one file more); a worker left without a file is an
    error."""
    files = data_files(config, "runner.train_data_dir")
    if not config.get("runner.split_file_list") or count == 1:
        return files
    share = fleet.util.get_file_shard(files)
    if not share:
        raise ConfigError(
            f"{config.where('runner.split_file_list')}: runner.split_file_list: worker {index} "
            f"of {count} gets none of the {len(files)} files of "
            f"{config.get('runner.train_data_dir')}; give at least one file per worker"
        )
    return share


def import_reader(config: Config, key: str) -> ModuleType:
    """The reader module `key` names (a path without `.py`, resolved against the config's
    folder); its folder goes on sys.path so that its own imports work."""
    path = config.get(key)
    if not path:
        raise ConfigError(f"{config.where(key)}: {key}: missing; name the reader module")
    file = path if path.endswith(".py") else path + ".py"
    if not os.path.isfile(file):
        raise ConfigError(f"{config.where(key)}: {key}: no reader module {file}")
    folder = os.path.dirname(file)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    name = f"fleet_rec_reader_{os.path.splitext(os.path.basename(file))[0]}"
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def batches(
    config: Config,
    reader_key: str,
    files: Sequence[str],
    feeds: Sequence[Variable],
    batch_size: int,
) -> Iterator[dict[str, Any]]:
    """Feed dicts of `batch_size` samples from the reader module's RecDataset."""
    module = import_reader(config, reader_key)
    if not hasattr(module, "RecDataset"):
        raise NotFound(f"{module.__file__}: the DataLoader reader module defines no RecDataset")
    samples = iter(module.RecDataset(list(files), config=config))
    while True:
        chunk = []
        for sample in samples:
            chunk.append(sample)
            if len(chunk) == batch_size:
                break
        if len(chunk) < batch_size:
            return
        yield _feed_of(chunk, feeds, module.__file__)


def _feed_of(chunk: list[Sequence[Any]], feeds: Sequence[Variable], where: str) -> dict:
    if len(chunk[0]) != len(feeds):
        raise InvalidArgument(
            f"{where}: a sample has {len(chunk[0])} fields but the model feeds {len(feeds)} "
            f"variables ({', '.join(v.name for v in feeds)})"
        )
    feed: dict[str, Any] = {}
    for i, var in enumerate(feeds):
        values = [np.asarray(sample[i]) for sample in chunk]
        lengths = [v.size for v in values]
        if var.lod_level > 0 and len(set(lengths)) > 1:
            flat = np.concatenate([v.reshape(-1) for v in values]).reshape(-1, 1)
            feed[var.name] = LoDTensor(flat.astype(_numpy_dtype(var)), lengths=[lengths])
            continue
        stacked = np.stack([v.reshape(-1) for v in values]).astype(_numpy_dtype(var))
        tail = list(var.shape[1:])
        if tail and all(d > 0 for d in tail):
            stacked = stacked.reshape([len(chunk)] + tail)
        feed[var.name] = stacked
    return feed


def _numpy_dtype(var: Variable) -> Any:
    return np.dtype(dtype_name(var.dtype))


def pipe_command(config: Config) -> str:
    """runner.pipe_command with its script made absolute (a `.py` word found in the config's
    folder) and `python` this interpreter, plus the config's path and the folder of the `common`
    helpers, as PaddleRec appends them."""
    command = config.get("runner.pipe_command")
    if not command:
        raise ConfigError(
            f"{config.where('runner.reader_type')}: runner.pipe_command: missing; "
            f"{config.get('runner.reader_type')} pipes every file through it"
        )
    words = shlex.split(command)
    if words and _PYTHON_WORD.match(os.path.basename(words[0])):
        words[0] = sys.executable
    # A script named relative to the config's folder (e.g. ../dnn/queuedataset_reader.py).
    for i, word in enumerate(words[1:], start=1):
        script = os.path.join(config.folder, word)
        if word.endswith(".py") and not os.path.isabs(word) and os.path.isfile(script):
            words[i] = os.path.normpath(script)
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    path = os.pathsep.join([package_root] + [p for p in inherited if p != package_root])
    words += [config.path, PIPE_UTILS_DIR]
    return f"PYTHONPATH={shlex.quote(path)} " + " ".join(shlex.quote(w) for w in words)


def make_dataset(config: Config, kind: str, feeds: Sequence[Variable], files: Sequence[str]) -> Any:
    """A QueueDataset or InMemoryDataset over `files` feeding `feeds` (loaded, for in-memory)."""
    name = "InMemoryDataset" if kind in ("InmemoryDataset", "InMemoryDataset") else kind
    dataset = fleet_dataset.DatasetFactory().create_dataset(name)
    dataset.set_use_var(list(feeds))
    dataset.set_pipe_command(pipe_command(config))
    dataset.set_batch_size(int(config.get("runner.train_batch_size")))
    dataset.set_thread(int(config.get("runner.thread_num") or 1))
    dataset.set_filelist(list(files))
    if name == "InMemoryDataset":
        dataset.load_into_memory()
    return dataset


def count_samples(files: Sequence[str]) -> int:
    """Lines in the files: the samples of line-per-sample data, for an ETA."""
    total = 0
    for path in files:
        with open(path, "rb") as f:
            total += sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    return total
