"""One epoch of a config-driven trainer, with either reader: the Executor.run loop over a
DataLoader reader's batches, or train_from_dataset over a Queue/InMemory dataset."""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Mapping

import numpy as np

import fleet
from fleet.executor import Executor
from fleet.framework import Program, Variable
from fleet.rec import data
from fleet.rec.config import Config
from fleet.rec.progress import Progress, scalar
from fleet.scope import global_scope


def reset_auc_states(program: Program) -> None:
    """Zeroes the persistable histograms of every AUC op, so that an epoch's AUC measures that
    epoch (PaddleRec's reset_auc)."""
    scope = global_scope()
    for op in program.global_block().ops:
        if op.type != "auc":
            continue
        for slot in ("StatPos", "StatNeg"):
            for name in op.input(slot):
                var = program.global_block().var(name)
                found = scope.find_var(name)
                if var.persistable and found is not None and found.is_initialized():
                    tensor = found.get_tensor()
                    tensor.set(np.zeros_like(tensor.numpy()))


def even_steps() -> Callable[[bool], bool]:
    """For the Executor.run loop of a job whose workers must step together (collective, PS
    sync): every worker steps only while all still have a batch (an all-reduce of 'I have
    one' before each step), so that a worker with more data never waits for one that is done."""

    def admit(has_batch: bool) -> bool:
        flag = np.array([1.0 if has_batch else 0.0])
        return bool(fleet.util.all_reduce(flag, "min")[0] > 0)

    return admit


def loader_epoch(
    exe: Executor,
    program: Program,
    batches: Iterable[dict[str, Any]],
    metrics: Mapping[str, Variable],
    progress: Progress,
    epoch: int,
    print_interval: int,
    admit: Callable[[bool], bool] | None = None,
) -> tuple[dict[str, float], int, float]:
    """Runs `program` on every batch; returns (last metric values, samples, seconds).

    `admit(has_batch)` (collective jobs) is asked before each step and ends the epoch when it
    answers False: every rank then runs the same number of steps."""
    names = list(metrics)
    fetch = [metrics[n] for n in names]
    values: dict[str, float] = {}
    samples, step = 0, 0
    start = window_start = time.perf_counter()
    window_samples = 0
    iterator = iter(batches)
    while True:
        feed = next(iterator, None)
        if admit is not None and not admit(feed is not None):
            break
        if feed is None:
            break
        results = exe.run(program, feed=feed, fetch_list=fetch)
        size = len(next(iter(feed.values())))
        step += 1
        samples += size
        window_samples += size
        progress.done += size
        values = {n: scalar(r) for n, r in zip(names, results)}
        if print_interval and step % print_interval == 0:
            now = time.perf_counter()
            rate = window_samples / (now - window_start) if now > window_start else 0.0
            print(progress.step_line(epoch, step, values, rate), flush=True)
            window_start, window_samples = now, 0
    progress.calibrate(samples)
    return values, samples, time.perf_counter() - start


def dataset_epoch(
    exe: Executor,
    program: Program,
    dataset: Any,
    metrics: Mapping[str, Variable],
    progress: Progress,
    epoch: int,
    print_interval: int,
    thread: int,
    batch_size: int,
    debug: bool = False,
) -> tuple[dict[str, float], int, float]:
    """train_from_dataset over `dataset`; returns (last metric values, samples, seconds)."""
    names = list(metrics)
    fetch = [metrics[n] for n in names]
    done_before = progress.done
    result = exe.train_from_dataset(
        program,
        dataset,
        thread=thread,
        debug=debug,
        fetch_list=fetch,
        fetch_info=names,
        print_period=print_interval or 0,
        print_fn=progress.dataset_printer(epoch, batch_size, {}),
    )
    progress.done = done_before + result.samples
    progress.calibrate(result.samples)
    values = {}
    for name, var in zip(names, fetch):
        last = result.fetch.get(var.name)
        values[name] = scalar(last) if last is not None else float("nan")
    return values, result.samples, result.seconds


def train_epochs(
    config: Config,
    exe: Executor,
    program: Program,
    feeds: list[Variable],
    metrics: Mapping[str, Variable],
    files: list[str],
    prefix: str,
    step_together: bool,
    save: Callable[[int], None],
) -> dict[str, float]:
    """The epochs of runner.epochs over `files` with the config's reader, each followed by its
    line of metrics and `save(epoch)`; returns the last epoch's metrics. `step_together`: the
    workers of the job meet at every step (sync, collective), so an Executor.run loop ends when
    the first worker runs out of batches (see even_steps)."""
    reader_type = config.get("runner.reader_type") or "DataLoader"
    batch_size = int(config.get("runner.train_batch_size"))
    epochs = int(config.get("runner.epochs"))
    print_interval = int(config.get("runner.print_interval") or 0)
    threads = int(config.get("runner.thread_num") or 1)
    progress = Progress(prefix, epochs, data.count_samples(files))
    dataset = None
    if reader_type != "DataLoader":
        dataset = data.make_dataset(config, reader_type, feeds, files)
    last: dict[str, float] = {}
    # PaddleRec resets the AUC states at each epoch's start only with use_auc; without it an
    # epoch's AUC counts every epoch so far.
    reset_auc = bool(config.get("runner.use_auc"))
    for epoch in range(epochs):
        if reset_auc:
            reset_auc_states(program)
        if dataset is None:
            batches = data.batches(config, "runner.train_reader_path", files, feeds, batch_size)
            admit = even_steps() if step_together else None
            last, samples, seconds = loader_epoch(
                exe, program, batches, metrics, progress, epoch, print_interval, admit
            )
        else:
            if reader_type != "QueueDataset":
                dataset.local_shuffle()
            debug = bool(config.get("runner.dataset_debug"))
            last, samples, seconds = dataset_epoch(
                exe,
                program,
                dataset,
                metrics,
                progress,
                epoch,
                print_interval,
                threads,
                batch_size,
                debug,
            )
        print(progress.epoch_line(epoch, last, samples, seconds), flush=True)
        save(epoch)
    return last
