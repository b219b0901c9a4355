"""hyper_parameters.optimizer.scale_rate_by_trainers (fleet/rec/rate_scaling.py): the trainers
each mode averages and the workers that read each sample, from the strategy static_ps_trainer
builds out of the config, and the rate word2vec's program trains at. In process: nothing is
trained."""

from __future__ import annotations

import sys

import pytest

import fleet
from fleet.rec import rate_scaling
from fleet.rec.config import load_config
from fleet.rec.model_loader import load_model
from fleet.rec.static_ps_trainer import strategy_of
from tests.python.rec import rec_jobs

CONFIG = str(rec_jobs.MODELS / "recall" / "word2vec" / "config.yaml")


def _job(*overrides: str, collective: bool = False):
    config = load_config(CONFIG, overrides)
    strategy = fleet.DistributedStrategy() if collective else strategy_of(config)
    return config, strategy


def _averaged(*overrides: str, workers: int = 2, collective: bool = False) -> int:
    config, strategy = _job(*overrides, collective=collective)
    return rate_scaling.trainers_averaged(config, strategy, workers, collective)


def _scale(*overrides: str, workers: int = 2, collective: bool = False) -> float:
    config, strategy = _job(*overrides, collective=collective)
    return rate_scaling.rate_scale(config, strategy, workers, collective)


def test_async_applies_every_push_in_full():
    assert _averaged("runner.sync_mode=async", "runner.thread_num=2") == 1


def test_geo_averages_the_workers():
    assert _averaged("runner.sync_mode=geo", "runner.geo_step=100", "runner.thread_num=2") == 2
    assert _averaged("runner.sync_mode=geo", "runner.geo_step=100", workers=3) == 3


def test_sync_averages_every_thread_of_every_worker():
    assert _averaged("runner.sync_mode=sync", "runner.thread_num=2") == 4
    assert _averaged("runner.sync_mode=sync", "runner.thread_num=1", workers=3) == 3


def test_collective_averages_the_ranks():
    assert _averaged("runner.thread_num=1", workers=2, collective=True) == 2


def test_one_process_is_one_trainer():
    config = load_config(CONFIG, ["runner.thread_num=2"])
    assert rate_scaling.trainers_averaged(config, None, 1, False) == 1
    assert rate_scaling.rate_scale(config, None, 1, False) == 1.0


def test_with_split_files_each_sample_is_read_once_so_the_scale_is_the_trainers_averaged():
    split = ("runner.split_file_list=True", "runner.thread_num=1")
    assert _scale("runner.sync_mode=sync", *split) == 2.0
    assert _scale("runner.sync_mode=geo", "runner.geo_step=100", *split) == 2.0
    assert _scale("runner.sync_mode=async", *split) == 1.0
    assert _scale(*split, collective=True) == 2.0


def test_when_every_worker_reads_every_sample_only_async_is_scaled_down():
    whole = ("runner.split_file_list=False", "runner.thread_num=1")
    assert _scale("runner.sync_mode=sync", *whole, workers=3) == 1.0
    assert _scale("runner.sync_mode=geo", "runner.geo_step=100", *whole) == 1.0
    assert _scale(*whole, collective=True) == 1.0
    # each of the 2 workers pushes its own step for every sample, each applied in full
    assert _scale("runner.sync_mode=async", *whole) == 0.5


def _sgd_rate(*overrides: str) -> float:
    """The learning rate word2vec's SGD ops read, built in one process under `overrides`."""
    sys.modules.pop("net", None)  # each model folder has its own net.py
    model = load_model(load_config(CONFIG, overrides))
    main, startup = fleet.Program(), fleet.Program()
    with fleet.program_guard(main, startup):
        model.net(model.create_feeds())
        model.create_optimizer()
    scope = fleet._core.Scope()
    exe = fleet.Executor(fleet.CPUPlace())
    exe.run(startup, scope=scope)
    rates = {op.input("LearningRate")[0] for op in main.global_block().ops if op.type == "sgd"}
    assert len(rates) == 1, rates
    return float(scope.find_var(rates.pop()).get_tensor().numpy().reshape(-1)[0])


@pytest.mark.parametrize("scale", ["True", "False"])
def test_one_process_trains_at_the_configured_rate_either_way(scale):
    rate = _sgd_rate(
        "hyper_parameters.optimizer.learning_rate=2.5",
        f"hyper_parameters.optimizer.scale_rate_by_trainers={scale}",
    )
    assert rate == pytest.approx(2.5)
