"""Evaluate the epochs a config-driven training saved (PaddleRec's tools/static_infer.py):

    python -m fleet.rec.static_infer -m models/rank/dnn/config.yaml

For each epoch from `infer_start_epoch` to `infer_end_epoch` (exclusive) it loads
`infer_load_path/<epoch>` (a one-process, collective or parameter-server save, see
fleet/rec/saving.py: a parameter-server one through its inference export), runs the
model's `infer_net` over `test_data_dir` with the `infer_reader_path` reader in batches of
`infer_batch_size`, and prints the metrics (the AUC over the whole test set).
"""

from __future__ import annotations

import inspect
import os
import sys
from typing import Any, Sequence

import fleet
from fleet.rec import data, saving
from fleet.rec.config import Config, ConfigError
from fleet.rec.entry import metrics_of, run_main
from fleet.rec.model_loader import load_model, seed_programs
from fleet.rec.progress import Progress
from fleet.rec.train_loop import loader_epoch, reset_auc_states


def _infer_feeds(model: Any) -> Any:
    takes_flag = "is_infer" in inspect.signature(model.create_feeds).parameters
    return model.create_feeds(is_infer=True) if takes_flag else model.create_feeds()


def run(config: Config) -> dict[int, dict[str, float]]:
    """Returns each evaluated epoch's metrics."""
    seed_programs(config)
    model = load_model(config)
    feeds = _infer_feeds(model)
    infer_net = getattr(model, "infer_net", None)
    if infer_net is None:
        raise ConfigError(f"{config.folder}/static_model.py: StaticModel has no infer_net()")
    metrics = metrics_of(infer_net(feeds), config, "infer_net")
    program = fleet.default_main_program()
    exe = fleet.Executor(fleet.CPUPlace())
    exe.run(fleet.default_startup_program())
    files = data.data_files(config, "runner.test_data_dir")
    load_path = config.get("runner.infer_load_path") or config.get("runner.model_save_path")
    first = int(config.get("runner.infer_start_epoch") or 0)
    end = int(config.get("runner.infer_end_epoch") or config.get("runner.epochs"))
    batch_size = int(config.get("runner.infer_batch_size") or config.get("runner.train_batch_size"))
    reader_key = (
        "runner.infer_reader_path"
        if config.get("runner.infer_reader_path")
        else "runner.train_reader_path"
    )
    print_interval = int(config.get("runner.print_interval") or 0)
    progress = Progress("infer ", end - first, data.count_samples(files))
    results = {}
    for epoch in range(first, end):
        folder = os.path.join(load_path, str(epoch))
        saving.load_for_evaluation(program, folder)
        if config.get("runner.use_auc"):  # as PaddleRec's static_infer
            reset_auc_states(program)
        batches = data.batches(config, reader_key, files, feeds, batch_size)
        last, samples, seconds = loader_epoch(
            exe, program, batches, metrics, progress, epoch, print_interval
        )
        print(progress.epoch_line(epoch, last, samples, seconds) + f", model: {folder}", flush=True)
        results[epoch] = last
    return results


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(argv, __doc__, run, "static_infer", "infer done")


if __name__ == "__main__":
    sys.exit(main())
