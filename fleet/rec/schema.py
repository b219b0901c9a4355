"""The keys a PaddleRec 2.x `config.yaml` may hold, with their types and what Fleet does with
them.

One table, read by `fleet.rec.config`: a key missing from it is an error (with the nearest known
key suggested), a key present with `acted=False` is accepted and announced once ("accepted, not
acted on"), so that a PaddleRec config copied as it is still loads. `hyper_parameters` belongs to
the model: only its `optimizer` section has a fixed shape; every other key there is the model's.
"""

from __future__ import annotations

import dataclasses
from typing import Any

# Value kinds: "str", "int", "number" (int or float), "bool", "list" (of anything), "str_list",
# "any". `choices` restricts a "str".


@dataclasses.dataclass(frozen=True)
class KeySpec:
    kind: str
    required: bool = False
    acted: bool = True
    choices: tuple[str, ...] = ()
    # A path resolved against the config's folder (as PaddleRec's tools do for data and readers).
    config_relative: bool = False
    why: str = ""


SYNC_MODES = ("async", "sync", "geo", "gpubox", "heter")
READER_TYPES = ("DataLoader", "QueueDataset", "InmemoryDataset", "InMemoryDataset", "RecDataset")

RUNNER: dict[str, KeySpec] = {
    "train_data_dir": KeySpec("str", config_relative=True),
    "train_reader_path": KeySpec("str", config_relative=True),
    "train_batch_size": KeySpec("int", required=True),
    "epochs": KeySpec("int", required=True),
    "print_interval": KeySpec("int"),
    "model_save_path": KeySpec("str"),
    "model_init_path": KeySpec("str"),
    "test_data_dir": KeySpec("str", config_relative=True),
    "infer_reader_path": KeySpec("str", config_relative=True),
    "infer_batch_size": KeySpec("int"),
    "infer_load_path": KeySpec("str"),
    "infer_start_epoch": KeySpec("int"),
    "infer_end_epoch": KeySpec("int"),
    "use_gpu": KeySpec("bool"),
    "use_auc": KeySpec("bool"),
    "use_inference": KeySpec("bool"),
    "save_inference_feed_varnames": KeySpec("str_list"),
    "save_inference_fetch_varnames": KeySpec("str_list"),
    "use_fleet": KeySpec("bool"),
    "sync_mode": KeySpec("str", choices=SYNC_MODES),
    "geo_step": KeySpec("int"),
    "split_file_list": KeySpec("bool"),
    "thread_num": KeySpec("int"),
    "reader_type": KeySpec("str", choices=READER_TYPES),
    "infer_reader_type": KeySpec("str", choices=READER_TYPES),
    "pipe_command": KeySpec("str"),
    "dataset_debug": KeySpec("bool"),
    "warmup_model_path": KeySpec("str"),
    "seed": KeySpec("int"),
    # Fleet's own: DistributedStrategy.a_sync_configs keys for a parameter-server job (the
    # async communicator's queues and staleness bounds), e.g. {max_sparse_staleness: 0}.
    "a_sync_configs": KeySpec("dict"),
    # Read by a model's own reader (PaddleRec's word2vec), not by the trainers.
    "word_count_dict_path": KeySpec("str", config_relative=True),
    "word_id_dict_path": KeySpec("str", config_relative=True),
    # Accepted so that PaddleRec's configs load; Fleet has nothing they would switch.
    "use_visual": KeySpec("bool", acted=False, why="Fleet has no VisualDL logging"),
    "use_xpu": KeySpec("bool", acted=False, why="Fleet has no XPU support"),
    "use_npu": KeySpec("bool", acted=False, why="Fleet has no NPU support"),
    "auc_num": KeySpec("int", acted=False, why="the trainer resets every AUC op it finds"),
    "use_save_data": KeySpec("bool", acted=False, why="Fleet does not dump training data"),
    "need_dump": KeySpec("bool", acted=False, why="Fleet has no field dump"),
    "dump_fields_path": KeySpec("str", acted=False, why="Fleet has no field dump"),
    "dump_fields": KeySpec("str_list", acted=False, why="Fleet has no field dump"),
    "dump_param": KeySpec("str_list", acted=False, why="Fleet has no field dump"),
    "reader_thread_num": KeySpec("int", acted=False, why="thread_num sets the reader threads"),
    "model_name": KeySpec("str", acted=False, why="informational only"),
    "log_interval": KeySpec("int", acted=False, why="print_interval sets the progress lines"),
}

OPTIMIZER: dict[str, KeySpec] = {
    "class": KeySpec("str", required=True),
    "learning_rate": KeySpec("number", required=True),
    "strategy": KeySpec("str", acted=False, why="runner.sync_mode picks the parameter-server mode"),
    # For a model's create_optimizer that builds a decaying learning rate (PaddleRec's word2vec).
    "decay_steps": KeySpec("int"),
    "decay_rate": KeySpec("number"),
    # The linear scaling rule (fleet/rec/rate_scaling.py), for a model whose create_optimizer
    # reads it (word2vec): learning_rate is one trainer's, times the trainers the mode averages.
    "scale_rate_by_trainers": KeySpec("bool"),
}

TOP_LEVEL: dict[str, KeySpec] = {
    "runner": KeySpec("dict", required=True),
    "hyper_parameters": KeySpec("dict", required=True),
    "workspace": KeySpec("str", config_relative=True),
}


def kind_matches(kind: str, value: Any) -> bool:
    """Whether `value` (as YAML built it) is of `kind`; bools are not numbers here."""
    if kind == "any":
        return True
    if kind == "bool":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == "int":
        return isinstance(value, int)
    if kind == "number":
        return isinstance(value, (int, float))
    if kind == "str":
        return isinstance(value, str)
    if kind == "list":
        return isinstance(value, list)
    if kind == "str_list":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind == "dict":
        return isinstance(value, dict)
    raise ValueError(f"unknown kind {kind!r}")


KIND_WORDS = {
    "str": "a string",
    "int": "an integer",
    "number": "a number",
    "bool": "True or False",
    "list": "a list",
    "str_list": "a list of strings",
    "dict": "a mapping of keys",
    "any": "anything",
}
