"""Train a PaddleRec model folder as a parameter-server job (PaddleRec's
tools/static_ps_trainer.py), launched by fleetrun:

    fleetrun --server_num=1 --worker_num=2 --module fleet.rec.static_ps_trainer \\
        -m models/rank/dnn/config.yaml

`runner.sync_mode` picks the mode (sync, async, geo with `geo_step`), `reader_type` the reader
(DataLoader: the Executor.run loop; QueueDataset / InmemoryDataset: train_from_dataset with
`thread_num` threads), `split_file_list` gives each worker its share of the files. After each
epoch the job saves fleet.save_persistables' checkpoint to `model_save_path/<epoch>` (and the
inference model with `use_inference`); `model_init_path` names a checkpoint to start from.
"""

from __future__ import annotations

import os
import sys
from typing import Sequence

import fleet
from fleet.errors import InvalidArgument
from fleet.rec import data, saving
from fleet.rec.config import Config, ConfigError
from fleet.rec.entry import metrics_of, run_main
from fleet.rec.model_loader import load_model, seed_programs
from fleet.rec.train_loop import train_epochs


def strategy_of(config: Config) -> fleet.DistributedStrategy:
    """runner.sync_mode (and geo_step) as PaddleRec's get_strategy sets them, then Fleet's
    runner.a_sync_configs (a bad key or value is an error naming its line)."""
    mode = config.get("runner.sync_mode") or "async"
    strategy = fleet.DistributedStrategy()
    for key, value in (config.get("runner.a_sync_configs") or {}).items():
        try:
            strategy.async_config.update({key: value}, "runner.a_sync_configs")
        except InvalidArgument as e:
            raise ConfigError(f"{config.where(f'runner.a_sync_configs.{key}')}: {e}") from None
    if mode == "sync":
        strategy.a_sync = False
    elif mode == "async":
        strategy.a_sync = True
    elif mode == "geo":
        steps = config.get("runner.geo_step")
        if not steps or int(steps) < 1:
            raise ConfigError(
                f"{config.where('runner.sync_mode')}: runner.geo_step: sync_mode geo needs "
                "geo_step >= 1 (the steps between exchanges)"
            )
        strategy.a_sync = True
        strategy.a_sync_configs = {"k_steps": int(steps)}
    return strategy


def run(config: Config) -> dict[str, float]:
    fleet.init()
    seed_programs(config)
    model = load_model(config)
    feeds = model.create_feeds()
    metrics = metrics_of(model.net(feeds), config, "net")
    if config.get("runner.use_inference"):  # refused now rather than after the first epoch
        saving.inference_vars(config, fleet.default_main_program())
    model.create_optimizer(strategy_of(config))
    init_path = config.get("runner.model_init_path") or config.get("runner.warmup_model_path")
    if fleet.is_server():
        fleet.init_server(init_path or None)
        fleet.run_server()
        return {}
    worker, workers = fleet.worker_index(), fleet.worker_num()
    program = fleet.default_main_program()
    exe = fleet.Executor(fleet.CPUPlace())
    exe.run(fleet.default_startup_program())
    fleet.init_worker()
    if init_path:
        fleet.load_model(init_path, mode=1)  # the servers loaded the tables at start
        print(f"worker {worker}: resumed from {init_path}", flush=True)

    files = data.worker_files(config, worker, workers)
    sync = config.get("runner.sync_mode") == "sync"
    last = train_epochs(
        config,
        exe,
        program,
        feeds,
        metrics,
        files,
        f"worker {worker}: ",
        sync,
        lambda epoch: _save(config, exe, program, epoch, worker),
    )
    fleet.stop_worker()
    return last


def _save(config: Config, exe: fleet.Executor, program: fleet.Program, epoch: int, worker: int):
    """Every worker takes part in the job's saves (worker 0 writes)."""
    folder = saving.epoch_dir(config, epoch)
    fleet.save_persistables(exe, folder, program)
    if config.get("runner.use_inference"):
        feed_names, fetch_vars = saving.inference_vars(config, program)
        fleet.save_inference_model(
            exe, os.path.join(folder, saving.INFERENCE_DIR), feed_names, fetch_vars, program
        )
    if worker == 0:
        print(f"worker 0: saved epoch {epoch} to {folder}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(argv, __doc__, run, "static_ps_trainer", "done")


if __name__ == "__main__":
    sys.exit(main())
