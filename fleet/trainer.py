"""train_from_dataset / infer_from_dataset: multi-threaded passes over a dataset in C++.

`thread` trainer threads each run the program on batches from the dataset's reader threads, in
a child scope of their own under `scope` (the parameters there are shared: Hogwild updates).
Python waits with the GIL released; every `print_period` batches a progress line with the
fetched values and the samples/s is printed. When the call returns, every thread and child
process of the pass has ended.

`fleet.Executor.train_from_dataset(...)` delegates here with the executor as first argument; the
pass runs on that executor (its seed, program cache, profile, distributed resources and step
hooks), exactly as `Executor.run` does.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import numpy as np

from fleet.dataset import DatasetBase
from fleet.errors import InvalidArgument, NotFound, Unavailable
from fleet.executor import global_scope
from fleet.framework import Program, Variable, default_main_program


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


def train_from_dataset(
    executor: Any,
    program: Program | None = None,
    dataset: DatasetBase | None = None,
    scope: Any = None,
    thread: int = 0,
    debug: bool = False,
    fetch_list: Sequence[Any] | None = None,
    fetch_info: Sequence[str] | None = None,
    print_period: int = 100,
    fetch_handler: Any = None,
) -> DatasetRunResult:
    """Trains `program` (default: the default main program) over one pass of `dataset`.

    thread: trainer threads; 0 takes the dataset's set_thread value. debug: also report the
    time spent per op role. fetch_list/fetch_info: variables (and their printed names) shown
    every print_period batches (0 = never).
    """
    return _run(
        executor,
        program,
        dataset,
        scope,
        thread,
        debug,
        fetch_list,
        fetch_info,
        print_period,
        fetch_handler,
        infer=False,
    )


def infer_from_dataset(
    executor: Any,
    program: Program | None = None,
    dataset: DatasetBase | None = None,
    scope: Any = None,
    thread: int = 0,
    debug: bool = False,
    fetch_list: Sequence[Any] | None = None,
    fetch_info: Sequence[str] | None = None,
    print_period: int = 100,
    fetch_handler: Any = None,
) -> DatasetRunResult:
    """Like train_from_dataset, but runs the program's forward part only (a for_test clone:
    no backward or optimizer op runs, so parameters do not change)."""
    return _run(
        executor,
        program,
        dataset,
        scope,
        thread,
        debug,
        fetch_list,
        fetch_info,
        print_period,
        fetch_handler,
        infer=True,
    )


def _run(
    executor: Any,
    program: Program | None,
    dataset: DatasetBase | None,
    scope: Any,
    thread: int,
    debug: bool,
    fetch_list: Sequence[Any] | None,
    fetch_info: Sequence[str] | None,
    print_period: int,
    fetch_handler: Any,
    infer: bool,
) -> DatasetRunResult:
    what = "infer_from_dataset" if infer else "train_from_dataset"
    if dataset is None or not isinstance(dataset, DatasetBase):
        raise InvalidArgument(
            f"{what}: dataset must be a fleet dataset "
            f"(DatasetFactory().create_dataset(...)), got {dataset!r}"
        )
    if fetch_handler is not None:
        raise Unavailable(
            f"{what}: fetch_handler is not supported; use fetch_list/fetch_info "
            "and print_period (the result holds the last values and sums)"
        )
    program = program if program is not None else default_main_program()
    program = getattr(program, "program", program)  # a CompiledProgram-like wrapper
    if infer:
        program = _for_inference(
            program,
            [v.name for v in dataset.use_vars]
            + [f.name if isinstance(f, Variable) else str(f) for f in (fetch_list or [])],
        )
    scope = scope if scope is not None else global_scope()
    threads = dataset.thread_num if not thread or thread <= 0 else int(thread)
    if isinstance(print_period, bool) or not isinstance(print_period, int) or print_period < 0:
        raise InvalidArgument(
            f"{what}: print_period must be a non-negative integer, got {print_period!r}"
        )
    _check_use_vars(what, program, dataset)
    names = _fetch_names(what, program, fetch_list)
    labels = list(fetch_info) if fetch_info is not None else list(names)
    if len(labels) != len(names):
        raise InvalidArgument(
            f"{what}: fetch_info has {len(labels)} names for {len(names)} fetch_list variables"
        )
    seed = program.random_seed or executor.seed
    prepared = executor._prepare(program, [], [], use_cache=True, holders=False)
    raw = executor._core.run_from_dataset(
        prepared,
        scope,
        dataset._pass_dataset(),
        threads,
        names,
        labels,
        print_period,
        bool(debug),
        seed,
        _print_line,
    )
    read = raw["read"]
    return DatasetRunResult(
        batches=raw["batches"],
        samples=raw["samples"],
        seconds=raw["seconds"],
        lines=read["lines"],
        skipped_lines=read["bad_lines"],
        skipped_examples=list(read["bad_line_examples"]),
        fetch=dict(zip(names, raw["last_fetch"])),
        fetch_lod={
            n: [list(level) for level in lod] for n, lod in zip(names, raw["last_fetch_lod"])
        },
        fetch_sums=dict(zip(names, raw["fetch_sums"])),
        profile=dict(raw["profile"]),
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


__all__ = ["DatasetRunResult", "infer_from_dataset", "train_from_dataset"]
