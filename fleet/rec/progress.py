"""Progress lines of the config-driven trainers: the model's metrics, samples/s and the ETA of
the run (from the samples the data files hold)."""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping

import numpy as np

_TRAINER_LINE = re.compile(r"^batch (\d+) \(thread \d+\): (?:(.*), )?([0-9.]+) samples/s")


def scalar(value: Any) -> float:
    array = np.asarray(value)
    return float(array.reshape(-1)[0]) if array.size else float("nan")


def eta(seconds: float) -> str:
    seconds = max(int(seconds), 0)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Progress:
    """Counts the samples of a run of `epochs` epochs of `samples_per_epoch` samples and
    prints PaddleRec-style lines (`epoch: E, batch_id: B, auc: ..., ips: R ins/s, ETA: ...`)."""

    def __init__(self, prefix: str, epochs: int, samples_per_epoch: int) -> None:
        self.prefix = prefix
        self.epochs = epochs
        self.total = epochs * samples_per_epoch
        self.done = 0
        self._calibrated = False

    def calibrate(self, epoch_samples: int) -> None:
        """After the first epoch: the run's total from the samples that epoch held (the line
        count is a guess: a reader may make several samples of a line, e.g. word2vec's pairs,
        and the last short batch is dropped)."""
        if not self._calibrated and epoch_samples > 0:
            self.total = self.epochs * epoch_samples
            self._calibrated = True

    def _eta(self, rate: float) -> str:
        if not self.total or rate <= 0:
            return "?"
        return eta((self.total - self.done) / rate)

    def step_line(self, epoch: int, batch: int, metrics: Mapping[str, float], rate: float) -> str:
        values = ", ".join(f"{k}: {v:.6f}" for k, v in metrics.items())
        return (
            f"{self.prefix}epoch: {epoch}, batch_id: {batch}, {values}, ips: {rate:.0f} ins/s, "
            f"ETA: {self._eta(rate)}"
        )

    def epoch_line(
        self, epoch: int, metrics: Mapping[str, float], samples: int, seconds: float
    ) -> str:
        values = ", ".join(f"{k}: {v:.6f}" for k, v in metrics.items())
        rate = samples / seconds if seconds > 0 else 0.0
        return (
            f"{self.prefix}epoch: {epoch} done, {values}, samples: {samples}, "
            f"ips: {rate:.0f} ins/s, epoch time: {seconds:.2f} s"
        )

    def dataset_printer(
        self, epoch: int, batch_size: int, names: Mapping[str, str]
    ) -> Callable[[str], None]:
        """A print_fn for train_from_dataset: its `batch N (thread t): name=value, ...,
        R samples/s` lines rewritten as step lines (metric names as the model gave them)."""
        done_before = self.done

        def on_line(line: str) -> None:
            found = _TRAINER_LINE.search(line)
            if not found:
                print(f"{self.prefix}{line}", flush=True)
                return
            batch, rate = int(found.group(1)), float(found.group(3))
            self.done = done_before + batch * batch_size
            values = {}
            for part in (found.group(2) or "").split(", "):
                key, sep, value = part.partition("=")
                if sep:
                    values[names.get(key, key)] = _number(value)
            print(self.step_line(epoch, batch, values, rate), flush=True)

        return on_line


def _number(text: str) -> float:
    try:
        return float(text.strip("[] "))
    except ValueError:
        return float("nan")
