"""The model of a PaddleRec model folder: `static_model.py` beside `config.yaml`, defining
`StaticModel(config)` with `create_feeds(is_infer=False)`, `net(inputs, is_infer=False)` (the
metrics dict the trainer prints), `create_optimizer(strategy=None)` and `infer_net(inputs)`."""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

import fleet
from fleet.errors import NotFound
from fleet.rec.config import Config, ConfigError

MODEL_FILE = "static_model.py"
MODEL_CLASS = "StaticModel"
_REQUIRED = ("create_feeds", "net", "create_optimizer")


def load_model(config: Config) -> Any:
    """An instance of the folder's StaticModel, built with `config`; its folder goes on
    sys.path (the model imports its own `net.py`, as PaddleRec's do)."""
    file = os.path.join(config.folder, MODEL_FILE)
    if not os.path.isfile(file):
        raise NotFound(f"{config.folder}: no {MODEL_FILE} beside {os.path.basename(config.path)}")
    if config.folder not in sys.path:
        sys.path.insert(0, config.folder)
    spec = importlib.util.spec_from_file_location("fleet_rec_static_model", file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cls = getattr(module, MODEL_CLASS, None)
    if cls is None:
        raise NotFound(f"{file}: defines no class {MODEL_CLASS}")
    missing = [name for name in _REQUIRED if not callable(getattr(cls, name, None))]
    if missing:
        raise NotFound(f"{file}: {MODEL_CLASS} lacks {', '.join(missing)}")
    return cls(config)


def check_supported(config: Config) -> None:
    """Settings Fleet refuses before any program is built."""
    if config.get("runner.use_gpu"):
        raise ConfigError(
            f"{config.where('runner.use_gpu')}: runner.use_gpu: True is not supported by the "
            "config-driven trainers yet (GPU training lands with the GPU issue); set it to False"
        )
    if config.get("runner.sync_mode") in ("gpubox", "heter"):
        mode = config.get("runner.sync_mode")
        raise ConfigError(
            f"{config.where('runner.sync_mode')}: runner.sync_mode: {mode} is not supported "
            "(it needs GPU parameter-server tables); use sync, async or geo"
        )


def check_collective(config: Config) -> None:
    """A collective job (use_fleet) runs one trainer thread per process: its all-reduces must
    reach the group in the same order on every rank."""
    threads = int(config.get("runner.thread_num") or 1)
    reader = config.get("runner.reader_type") or "DataLoader"
    if config.get("runner.use_fleet") and threads > 1 and reader != "DataLoader":
        raise ConfigError(
            f"{config.where('runner.thread_num')}: runner.thread_num: {threads} with use_fleet: "
            "a collective job trains with one thread per process; set thread_num: 1 and start "
            "more processes (fleetrun --nproc_per_node)"
        )


def seed_programs(config: Config) -> None:
    """The default programs' random seed (runner.seed, PaddleRec's paddle.seed(12345) without
    one), so that a run is repeatable."""
    seed = int(config.get("runner.seed") or 12345)
    fleet.default_main_program().random_seed = seed
    fleet.default_startup_program().random_seed = seed
