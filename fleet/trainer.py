"""One pass of a dataset through a program in C++ trainer threads: the checks of the pass's
arguments and the result it returns. `Executor.train_from_dataset` / `infer_from_dataset` (in
fleet/executor.py) drive the pass on the executor's own prepared program, seed, profile,
distributed resources and step hooks, exactly as `Executor.run` does.

`thread` trainer threads each run the program on batches from the dataset's reader threads, in
a child scope of their own under `scope` (the parameters there are shared: Hogwild updates).
Python waits with the GIL released; every `print_period` batches a progress line with the
fetched values and the samples/s is printed. When the call returns, every thread and child
process of the pass has ended.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import numpy as np

from fleet.dataset import DatasetBase
from fleet.errors import InvalidArgument, NotFound, Unavailable
from fleet.framework import Program, Variable, default_main_program
from fleet.scope import global_scope


@dataclasses.dataclass
class DatasetRunResult:
    """What a pass did. `fetch` holds the fetch variables' values after the last batch to
    finish (`fetch_lod`: their lod offsets); `fetch_sums` the sum of each one's elements over
    every batch (for a scalar loss, fetch_sums[name] / batches is the pass's mean loss)."""

    batches: int
    samples: int
    seconds: float
    lines: int
    skipped_lines: int
    skipped_examples: list[str]
    fetch: dict[str, np.ndarray | None]
    fetch_lod: dict[str, list[list[int]]]
    fetch_sums: dict[str, float]
    profile: dict[str, float]

    @property
    def samples_per_sec(self) -> float:
        return self.samples / self.seconds if self.seconds > 0 else 0.0

    def fetch_mean(self, name: str) -> float:
        """Mean over batches of a scalar fetch variable."""
        return self.fetch_sums[name] / self.batches if self.batches else float("nan")


@dataclasses.dataclass
class PassRequest:
    """The arguments of one train_from_dataset / infer_from_dataset call, as the user gave them
    (see Executor.train_from_dataset)."""

    infer: bool
    program: Program | None
    dataset: DatasetBase | None
    scope: Any
    thread: int
    debug: bool
    fetch_list: Sequence[Any] | None
    fetch_info: Sequence[str] | None
    print_period: int
    fetch_handler: Any
    print_fn: Callable[[str], None] | None

    @property
    def what(self) -> str:
        return "infer_from_dataset" if self.infer else "train_from_dataset"


@dataclasses.dataclass
class CheckedPass:
    """A pass ready for the C++ trainer: the program to run (a for_test clone when inferring),
    the scope, the thread count and the fetched names with their printed labels."""

    program: Program
    dataset: DatasetBase
    scope: Any
    threads: int
    fetch_names: list[str]
    fetch_labels: list[str]
    print_period: int
    debug: bool
    print_fn: Callable[[str], None]


def check_pass(request: PassRequest) -> CheckedPass:
    """Checks the request against its program and dataset, naming the argument at fault, and
    fills in the defaults (default main program, global scope, the dataset's thread count)."""
    what, dataset = request.what, request.dataset
    if dataset is None or not isinstance(dataset, DatasetBase):
        raise InvalidArgument(
            f"{what}: dataset must be a fleet dataset "
            f"(DatasetFactory().create_dataset(...)), got {dataset!r}"
        )
    if request.fetch_handler is not None:
        raise Unavailable(
            f"{what}: fetch_handler is not supported; use fetch_list/fetch_info "
            "and print_period (the result holds the last values and sums)"
        )
    program = request.program if request.program is not None else default_main_program()
    program = getattr(program, "program", program)  # a CompiledProgram-like wrapper
    if request.infer:
        program = _for_inference(
            program,
            [v.name for v in dataset.use_vars]
            + [f.name if isinstance(f, Variable) else str(f) for f in (request.fetch_list or [])],
        )
    thread, print_period = request.thread, request.print_period
    threads = dataset.thread_num if not thread or thread <= 0 else int(thread)
    if isinstance(print_period, bool) or not isinstance(print_period, int) or print_period < 0:
        raise InvalidArgument(
            f"{what}: print_period must be a non-negative integer, got {print_period!r}"
        )
    _check_use_vars(what, program, dataset)
    names = _fetch_names(what, program, request.fetch_list)
    labels = list(request.fetch_info) if request.fetch_info is not None else list(names)
    if len(labels) != len(names):
        raise InvalidArgument(
            f"{what}: fetch_info has {len(labels)} names for {len(names)} fetch_list variables"
        )
    return CheckedPass(
        program=program,
        dataset=dataset,
        scope=request.scope if request.scope is not None else global_scope(),
        threads=threads,
        fetch_names=names,
        fetch_labels=labels,
        print_period=print_period,
        debug=bool(request.debug),
        print_fn=request.print_fn or _print_line,
    )


def profile_dict(stats: Any) -> dict[str, float]:
    """The user's view of op times by role (`_core.RunStats`): seconds per role and the runs."""
    return {
        "forward_s": stats.forward_s,
        "backward_s": stats.backward_s,
        "optimize_s": stats.optimize_s,
        "other_s": stats.other_s,
        "runs": stats.runs,
    }


def pass_result(raw: Any, fetch_names: list[str]) -> DatasetRunResult:
    """The result of a pass from the C++ trainer's (`_core.TrainerResult`)."""
    read = raw.read
    return DatasetRunResult(
        batches=raw.batches,
        samples=raw.samples,
        seconds=raw.seconds,
        lines=read.lines,
        skipped_lines=read.bad_lines,
        skipped_examples=list(read.bad_line_examples),
        fetch=dict(zip(fetch_names, raw.last_fetch)),
        fetch_lod={
            n: [list(level) for level in lod] for n, lod in zip(fetch_names, raw.last_fetch_lod)
        },
        fetch_sums=dict(zip(fetch_names, raw.fetch_sums)),
        profile=profile_dict(raw.profile),
    )


def _for_inference(program: Program, keep: list[str]) -> Program:
    """A for_test clone that still declares the fed and fetched variables (the clone drops
    variables no remaining op uses)."""
    clone = program.clone(for_test=True)
    source, target = program.global_block(), clone.global_block()
    for name in keep:
        if source.has_var(name) and not target.has_var(name):
            v = source.var(name)
            target.create_var(
                name,
                shape=v.shape,
                dtype=v.dtype,
                lod_level=v.lod_level,
                persistable=v.persistable,
                stop_gradient=v.stop_gradient,
            )
    return clone


def _print_line(line: str) -> None:
    print(line, flush=True)


def _check_use_vars(what: str, program: Program, dataset: DatasetBase) -> None:
    block = program.global_block()
    for var in dataset.use_vars:
        if not block.has_var(var.name):
            raise NotFound(
                f"{what}: dataset variable '{var.name}' (set_use_var) is not a "
                "variable of the program"
            )
        declared = block.var(var.name)
        if (declared.dtype, declared.lod_level) != (var.dtype, var.lod_level):
            raise InvalidArgument(
                f"{what}: dataset variable '{var.name}' is declared differently in the "
                f"program (dtype {declared.dtype}, lod_level {declared.lod_level}) than in "
                f"set_use_var (dtype {var.dtype}, lod_level {var.lod_level})"
            )


def _fetch_names(what: str, program: Program, fetch_list: Sequence[Any] | None) -> list[str]:
    names = [f.name if isinstance(f, Variable) else str(f) for f in (fetch_list or [])]
    block = program.global_block()
    for name in names:
        if not block.has_var(name):
            raise NotFound(f"{what}: fetch variable '{name}' is not a variable of the program")
    return names


__all__ = ["CheckedPass", "DatasetRunResult", "PassRequest", "check_pass", "pass_result"]
