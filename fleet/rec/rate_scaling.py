"""The linear scaling rule as a config option a model's create_optimizer may honour:
`hyper_parameters.optimizer.scale_rate_by_trainers: True` makes `learning_rate` the rate of one
process, and scales it so that every mode applies about as much change per sample as one
process does: times the trainers whose gradients (or changes) the mode averages into one
update, divided by the workers that read each sample.

Why: with a loss that is a batch mean, a mode that averages N trainers moves a row by 1/N of what
one process moves it per sample at the same rate; a sample that every worker reads (no
`split_file_list`) and whose pushes async applies in full moves it W times. SGD models whose
rate sits near the edge of what the data takes (word2vec) then land at a different point of
their rate curve in each mode; for Adam, whose step is about the rate whatever the gradient,
the steps per sample count the same way (models/README.md, "word2vec: the same rate per sample
in every mode" and "wide_deep's async").

What each mode averages (the scale's numerator):
    one process (no strategy)       1: every thread's step is applied in full
    async                           1: every push is applied in full
    GEO                             workers: each exchange averages the workers' changes
    sync                            workers x thread_num: one step averages every thread's
                                    gradient
    collective                      ranks: the all-reduce averages (one thread per rank)
How many workers read each sample (the denominator): 1 with `runner.split_file_list` or in one
process, every worker (rank) without it.
"""

from __future__ import annotations

from typing import Any, Optional

from fleet.fleet_api import instance as fleet_instance
from fleet.rec.config import Config

OPTION = "hyper_parameters.optimizer.scale_rate_by_trainers"


def trainers_averaged(
    config: Config, strategy: Optional[Any], workers: int, collective: bool
) -> int:
    """How many trainers' gradients or changes one update averages in this job (table above).
    `strategy` is what the trainer passed to create_optimizer (None in one process), `workers`
    the job's workers (ranks), `collective` whether it is a collective job."""
    if strategy is None:
        return 1
    if collective:
        return workers
    if not strategy.a_sync:
        return workers * int(config.get("runner.thread_num") or 1)
    if int(strategy.a_sync_configs.get("k_steps") or 0) > 0:
        return workers
    return 1


def readers_of_each_sample(config: Config, strategy: Optional[Any], workers: int) -> int:
    """How many workers (ranks) train on each sample: every one of them unless
    runner.split_file_list gives each its own share of the files."""
    if strategy is None or config.get("runner.split_file_list"):
        return 1
    return workers


def rate_scale(config: Config, strategy: Optional[Any], workers: int, collective: bool) -> float:
    """The factor scale_rate_by_trainers applies to learning_rate (module docstring)."""
    averaged = trainers_averaged(config, strategy, workers, collective)
    return averaged / readers_of_each_sample(config, strategy, workers)


def learning_rate(config: Config, strategy: Optional[Any]) -> float:
    """hyper_parameters.optimizer.learning_rate, times rate_scale when the config sets
    scale_rate_by_trainers (a notice says the rate used)."""
    rate = float(config.get("hyper_parameters.optimizer.learning_rate"))
    if not config.get(OPTION):
        return rate
    workers, collective = 1, False
    if strategy is not None:
        workers, collective = fleet_instance.worker_num(), fleet_instance.is_collective()
    averaged = trainers_averaged(config, strategy, workers, collective)
    readers = readers_of_each_sample(config, strategy, workers)
    if averaged != readers:
        print(
            f"notice: {config.where(OPTION)}: {OPTION}: this job averages {averaged} trainers' "
            f"updates and {readers} worker(s) read each sample; learning rate {rate:g} x "
            f"{averaged} / {readers} = {rate * averaged / readers:g}",
            flush=True,
        )
    return rate * averaged / readers
