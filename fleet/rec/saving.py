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
"""

from __future__ import annotations

import os
from typing import Any

from fleet.errors import NotFound
from fleet.framework import Program, Variable
from fleet.rec.config import Config, ConfigError
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
