"""Training curves and progress lines shared by the examples (`--plot FILE.png`).

A ``Curve`` records, per logging step, the loss, the train AUC (when the model has one) and the
samples/s, and per epoch the test metric; ``save`` draws them with matplotlib's Agg backend (no
display needed) into one PNG of three panels. ``progress`` formats a progress line with an ETA
when the number of samples to train is known. Parameter-server jobs plot worker 0's curve.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Callable

_TRAINER_LINE = re.compile(r"batch (\d+) \(thread \d+\): (.*), ([0-9.]+) samples/s")


@dataclasses.dataclass
class Curve:
    title: str
    steps: list[int] = dataclasses.field(default_factory=list)
    loss: list[float] = dataclasses.field(default_factory=list)
    train_auc: list[float] = dataclasses.field(default_factory=list)
    rate: list[float] = dataclasses.field(default_factory=list)
    epochs: list[int] = dataclasses.field(default_factory=list)
    test_metric: list[float] = dataclasses.field(default_factory=list)
    test_metric_name: str = "test_auc"

    def log_step(
        self, step: int, loss: float, samples_per_sec: float, train_auc: float = math.nan
    ) -> None:
        self.steps.append(step)
        self.loss.append(float(loss))
        self.train_auc.append(float(train_auc))
        self.rate.append(float(samples_per_sec))

    def log_epoch(self, epoch: int, value: float) -> None:
        self.epochs.append(epoch)
        self.test_metric.append(float(value))

    def log_trainer_line(self, line: str, step_offset: int = 0) -> bool:
        """Records a progress line of train_from_dataset (``batch N (thread t): loss=...,
        train_auc=..., R samples/s``); False when the line is not one."""
        found = _TRAINER_LINE.search(line)
        if not found:
            return False
        values = dict(part.split("=", 1) for part in found.group(2).split(", ") if "=" in part)
        self.log_step(
            step_offset + int(found.group(1)),
            _number(values.get("loss")),
            float(found.group(3)),
            _number(values.get("train_auc")),
        )
        return True

    def save(self, path: str) -> None:
        """Writes the PNG (1500 x 450 pixels): loss and train AUC per step, samples/s per step,
        the test metric per epoch."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, (ax_loss, ax_rate, ax_test) = plt.subplots(1, 3, figsize=(15, 4.5), dpi=100)
        fig.suptitle(self.title)
        ax_loss.plot(self.steps, self.loss, color="tab:blue", label="loss")
        ax_loss.set_xlabel("step")
        ax_loss.set_ylabel("loss", color="tab:blue")
        has_auc = any(not math.isnan(v) for v in self.train_auc)
        ax_loss.set_title(
            "loss and train AUC per logging step" if has_auc else "loss per logging step"
        )
        if has_auc:
            ax_auc = ax_loss.twinx()
            ax_auc.plot(self.steps, self.train_auc, color="tab:orange", label="train AUC")
            ax_auc.set_ylabel("train AUC", color="tab:orange")
        ax_rate.plot(self.steps, self.rate, color="tab:green")
        ax_rate.set_xlabel("step")
        ax_rate.set_ylabel("samples/s")
        ax_rate.set_ylim(bottom=0)
        ax_rate.set_title("throughput")
        ax_test.plot(self.epochs, self.test_metric, marker="o", color="tab:red")
        ax_test.set_xlabel("epoch")
        ax_test.set_ylabel(self.test_metric_name)
        ax_test.set_xticks(self.epochs or [1])
        ax_test.set_title(f"{self.test_metric_name} per epoch")
        for ax in (ax_loss, ax_rate, ax_test):
            ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)


def _number(text: str | None) -> float:
    if text is None:
        return math.nan
    try:
        return float(text.strip("[]").split()[0])
    except (ValueError, IndexError):
        return math.nan


def progress(step: int, samples_per_sec: float, done: int = 0, total: int = 0) -> str:
    """``step S, R samples/s`` plus ``, ETA M:SS`` when ``total`` samples are known."""
    line = f"step {step}, {samples_per_sec:.0f} samples/s"
    if total and samples_per_sec > 0:
        left = max(total - done, 0) / samples_per_sec
        line += f", ETA {int(left) // 60}:{int(left) % 60:02d}"
    return line


def dataset_progress(
    curve: Curve, prefix: str, batch_size: int, done_before: int = 0, total: int = 0
) -> Callable[[str], None]:
    """A ``print_fn`` for ``train_from_dataset`` that records its progress lines on ``curve``
    (steps continue from the curve's last one) and prints each, then a line with the ETA;
    ``done_before`` and ``total`` count samples (0 when the total is unknown)."""
    offset = curve.steps[-1] if curve.steps else 0

    def on_line(line: str) -> None:
        print(line, flush=True)  # the trainer's own line, then the one with the ETA
        if not curve.log_trainer_line(line, offset):
            return
        done = done_before + (curve.steps[-1] - offset) * batch_size
        text = f"{prefix} {progress(curve.steps[-1], curve.rate[-1], done, total)}"
        text += f", loss {curve.loss[-1]:.5f}"
        if not math.isnan(curve.train_auc[-1]):
            text += f", train_auc {curve.train_auc[-1]:.5f}"
        print(text, flush=True)

    return on_line


def count_lines(paths: list[str]) -> int:
    """Lines in the files (the samples of line-per-sample data), for an ETA."""
    total = 0
    for path in paths:
        with open(path, "rb") as f:
            total += sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    return total
