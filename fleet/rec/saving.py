"""Where the config-driven trainers save and resume.

`model_save_path/<epoch>/` after each epoch:
* one process or a collective job (rank 0 writes): `rec_static.npz`, every persistable of the
  training program (paddle.static.save's content); `model_init_path` names such a folder (or
  the file) to resume from;
* a parameter-server job: fleet.save_persistables' checkpoint (the servers' tables and worker
  0's own persistables); `model_init_path` names one, which the servers load at start
  (fleet.init_server) and the workers read their persistables from;
* with `use_inference: True` also `rec_inference/`, the model pruned to
  `save_inference_fetch_varnames` from `save_inference_feed_varnames` (fleet.load_inference_model
  reads it, in any kind of job).

static_infer evaluates any of them in one process (`load_for_evaluation`): a parameter-server
save through its inference export, whose `params.npz` names every parameter the prediction reads
(the checkpoint's table files are keyed by table id, not by the program's names).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from fleet.errors import InvalidArgument, NotFound
from fleet.framework import Program, Variable
from fleet.model_files import PARAMS_FILE
from fleet.ps.checkpoint import MANIFEST_NAME
from fleet.rec.config import Config, ConfigError
from fleet.scope import global_scope
from fleet.static import io as static_io

PARAMS_PREFIX = "rec_static"
INFERENCE_DIR = "rec_inference"


def epoch_dir(config: Config, epoch: int) -> str:
    return os.path.join(config.get("runner.model_save_path") or "model_output", str(epoch))


def init_prefix(path: str) -> str:
    """The rec_static prefix of a model_init_path given as a folder or as the file."""
    if os.path.isdir(path):
        return os.path.join(path, PARAMS_PREFIX)
    return path[: -len(static_io.PERSISTABLES_SUFFIX)] if path.endswith(".npz") else path


def inference_vars(config: Config, program: Program) -> tuple[list[str], list[Variable]]:
    """The feed names and fetch variables of the inference model, as the config names them."""
    block = program.global_block()
    feeds = list(config.get("runner.save_inference_feed_varnames") or [])
    fetches = list(config.get("runner.save_inference_fetch_varnames") or [])
    for key, names in (
        ("runner.save_inference_feed_varnames", feeds),
        ("runner.save_inference_fetch_varnames", fetches),
    ):
        if not names:
            raise ConfigError(f"{config.where('runner.use_inference')}: use_inference needs {key}")
        unknown = [n for n in names if not block.has_var(n)]
        if unknown:
            raise ConfigError(
                f"{config.where(key)}: {key}: {', '.join(unknown)} is not a variable of the program"
            )
    return feeds, [block.var(n) for n in fetches]


def save_local(config: Config, exe: Any, program: Program, epoch: int) -> str:
    """One process's save of an epoch; returns the folder."""
    folder = epoch_dir(config, epoch)
    static_io.save(program, os.path.join(folder, PARAMS_PREFIX))
    if config.get("runner.use_inference"):
        feeds, fetches = inference_vars(config, program)
        static_io.save_inference_model(
            os.path.join(folder, INFERENCE_DIR), feeds, fetches, exe, program=program
        )
    return folder


def load_local(program: Program, path: str) -> list[str]:
    prefix = init_prefix(path)
    if not os.path.isfile(prefix + static_io.PERSISTABLES_SUFFIX):
        raise NotFound(
            f"no one-process save at {path} (expected {prefix + static_io.PERSISTABLES_SUFFIX}); "
            "a parameter-server job saves fleet.save_persistables' checkpoint instead, which "
            "its servers resume from (runner.model_init_path of static_ps_trainer), and with "
            f"use_inference an inference model in {INFERENCE_DIR}/ for fleet.load_inference_model"
        )
    return static_io.load(program, prefix)


def load_for_evaluation(program: Program, folder: str) -> list[str]:
    """Sets `program`'s parameters in the global scope from an epoch folder of any trainer: a
    one-process or collective save (rec_static.npz), or a parameter-server save (its
    checkpoint, and the inference export beside it, which holds the parameters by name);
    returns the names set."""
    if os.path.isfile(os.path.join(folder, MANIFEST_NAME)) and not os.path.isfile(
        init_prefix(folder) + static_io.PERSISTABLES_SUFFIX
    ):
        export = os.path.join(folder, INFERENCE_DIR)
        if not os.path.isfile(os.path.join(export, PARAMS_FILE)):
            raise NotFound(
                f"{folder} is a parameter-server checkpoint without its inference export "
                f"({export}/{PARAMS_FILE}): its table files are keyed by table id, not by the "
                "program's names, so static_infer reads a parameter-server job's parameters "
                "from the export; train with runner.use_inference: True (and "
                "save_inference_feed_varnames / save_inference_fetch_varnames)"
            )
        return load_ps_export(program, export)
    return load_local(program, folder)


def load_ps_export(program: Program, export: str) -> list[str]:
    """The parameters of `program` from a parameter-server job's inference export: dense ones by
    name; a sparse table from its saved rows (`<param>@KEYS`, `<param>@ROWS`, see
    fleet/ps/inference.py) scattered into the one-process program's [rows, dim] table. A row
    the servers never held reads as zeros, as in the export's own lookup; saved ids beyond the
    program's table size cannot be fed to it and are left out."""
    path = os.path.join(export, PARAMS_FILE)
    scope = global_scope()
    block = program.global_block()
    params = [v for v in block.vars.values() if v.is_parameter]
    loaded = []
    with np.load(path) as saved:
        for param in params:
            if param.name in saved.files:
                value = saved[param.name]
            elif f"{param.name}@KEYS" in saved.files:
                value = _table_from_rows(
                    param, saved[f"{param.name}@KEYS"], saved[f"{param.name}@ROWS"], path
                )
            else:
                raise NotFound(
                    f"{path} has no value of parameter '{param.name}': the export holds what "
                    "computes runner.save_inference_fetch_varnames, and infer_net reads more"
                )
            if tuple(value.shape) != tuple(param.shape):
                raise InvalidArgument(
                    f"{path}: '{param.name}' has shape {tuple(value.shape)}, the program's "
                    f"has {tuple(param.shape)}"
                )
            scope.var(param.name).get_tensor().set(value)
            loaded.append(param.name)
    return loaded


def _table_from_rows(param: Variable, keys: np.ndarray, rows: np.ndarray, path: str) -> np.ndarray:
    size, dim = int(param.shape[0]), int(param.shape[1])
    if rows.size and rows.shape[1] != dim:
        raise InvalidArgument(
            f"{path}: the rows of table '{param.name}' have dim {rows.shape[1]}, the program's "
            f"table has {dim}"
        )
    table = np.zeros((size, dim), np.float32)
    fits = (keys >= 0) & (keys < size)
    table[keys[fits]] = rows[fits]
    return table
