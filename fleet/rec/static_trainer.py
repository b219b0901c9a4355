"""Train a PaddleRec model folder in one process, or data parallel under `fleetrun --collective`
with `runner.use_fleet: True` (PaddleRec's tools/static_trainer.py):

    python -m fleet.rec.static_trainer -m models/rank/dnn/config.yaml
    fleetrun --collective --nproc_per_node=2 --module fleet.rec.static_trainer \\
        -m models/rank/dnn/config.yaml -o runner.use_fleet=True

Each epoch prints the model's metrics with samples/s and the run's ETA, and saves to
`model_save_path/<epoch>` (see fleet/rec/saving.py); `model_init_path` resumes.
"""

from __future__ import annotations

import sys
from typing import Sequence

import fleet
from fleet.rec import data, saving
from fleet.rec.config import Config
from fleet.rec.entry import metrics_of, run_main
from fleet.rec.model_loader import check_collective, load_model, seed_programs
from fleet.rec.train_loop import train_epochs


def run(config: Config) -> dict[str, float]:
    """Trains as the config says; returns the last epoch's metrics."""
    use_fleet = bool(config.get("runner.use_fleet"))
    check_collective(config)
    if config.get("runner.a_sync_configs"):
        print(
            f"notice: {config.where('runner.a_sync_configs')}: runner.a_sync_configs is for "
            "parameter-server jobs (fleet.rec.static_ps_trainer); not acted on here",
            flush=True,
        )
    seed_programs(config)
    model = load_model(config)
    feeds = model.create_feeds()
    metrics = metrics_of(model.net(feeds), config, "net")
    if config.get("runner.use_inference"):  # refused now rather than after the first epoch
        saving.inference_vars(config, fleet.default_main_program())
    if use_fleet:
        fleet.init(is_collective=True)
        model.create_optimizer(fleet.DistributedStrategy())
        rank, ranks = fleet.worker_index(), fleet.worker_num()
    else:
        model.create_optimizer()
        rank, ranks = 0, 1
    program = fleet.default_main_program()
    exe = fleet.Executor(fleet.CPUPlace())
    exe.run(fleet.default_startup_program())
    init_path = config.get("runner.model_init_path")
    if init_path:
        loaded = saving.load_local(program, init_path)
        print(f"resumed {len(loaded)} variables from {init_path}", flush=True)

    files = data.worker_files(config, rank, ranks)
    prefix = f"rank {rank}: " if use_fleet else ""

    def save(epoch: int) -> None:
        if rank == 0:  # the ranks hold the same parameters
            folder = saving.save_local(config, exe, program, epoch)
            print(f"{prefix}saved epoch {epoch} to {folder}", flush=True)

    return train_epochs(
        config, exe, program, feeds, metrics, files, prefix, use_fleet and ranks > 1, save
    )


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(argv, __doc__, run, "static_trainer", "training done")


if __name__ == "__main__":
    sys.exit(main())
