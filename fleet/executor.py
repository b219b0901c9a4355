"""Executor, places, scopes and LoD tensors for feeding sequences.

`Executor.run` adds feed and fetch ops to a copy of the program, has C++ prepare it once (the
result is cached per program version and feed/fetch names), and runs it with the GIL released.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from fleet import _core
from fleet._dtypes import dtype_name, numpy_dtype, to_dtype
from fleet.compiler import CompiledProgram
from fleet.data_parallel import DataParallelRunner
from fleet.errors import InvalidArgument, NotFound, Unavailable
from fleet.framework import (
    LOD_TENSOR_ARRAY,
    OP_ROLE_OTHER,
    Operator,
    Program,
    Variable,
    default_main_program,
)
from fleet.proto import framework_pb2 as pb
from fleet.scope import default_resources, global_scope, notify_run_listeners, scope_guard
from fleet.trainer import DatasetRunResult, PassRequest, check_pass, pass_result, profile_dict

FEED_HOLDER, FETCH_HOLDER = "feed", "fetch"


class CPUPlace:
    def __repr__(self) -> str:
        return "CPUPlace()"


class CUDAPlace:
    def __init__(self, device_id: int = 0) -> None:
        self.device_id = device_id

    def __repr__(self) -> str:
        return f"CUDAPlace({self.device_id})"


def cuda_places(device_ids: Sequence[int] | None = None) -> list[CUDAPlace]:
    """fluid.cuda_places: a CUDAPlace per id of `device_ids`; by default the ids in
    FLAGS_selected_gpus (comma-separated, as fleetrun sets it per process), else every visible
    device. Unavailable in a build without CUDA."""
    if not _core.compiled_with_cuda:
        raise Unavailable("cuda_places: Fleet was built without CUDA")
    if device_ids is None:
        selected = os.environ.get("FLAGS_selected_gpus", "").strip()
        if selected:
            try:
                device_ids = [int(s) for s in selected.split(",")]
            except ValueError:
                raise InvalidArgument(
                    f"FLAGS_selected_gpus={selected!r}: expected comma-separated device ids"
                ) from None
        else:
            device_ids = list(range(_core.cuda_device_count()))
    return [CUDAPlace(i) for i in device_ids]


def LoDTensor(
    values: Any = None,
    lengths: Sequence[Sequence[int]] | None = None,
    lod: Sequence[Sequence[int]] | None = None,
) -> Any:
    """A tensor to feed sequences: `values` rows grouped by `lengths` (per level, e.g.
    [[2, 3]] for two sequences of 2 and 3 rows) or by `lod` offsets ([[0, 2, 5]])."""
    tensor = _core.LoDTensor()
    if values is not None:
        tensor.set(np.asarray(values))
    if lengths is not None and lod is not None:
        raise InvalidArgument("LoDTensor: give lengths or lod, not both")
    if lengths is not None:
        tensor.set_recursive_sequence_lengths([list(level) for level in lengths])
    if lod is not None:
        tensor.set_lod([list(level) for level in lod])
    return tensor


def create_lod_tensor(
    data: Any, recursive_seq_lens: Sequence[Sequence[int]], place: Any = None
) -> Any:
    """fluid.create_lod_tensor: `data` as an array (or a list of per-sequence lists)."""
    if isinstance(data, list) and data and isinstance(data[0], (list, tuple, np.ndarray)):
        data = np.concatenate([np.asarray(d).reshape(len(d), -1) for d in data])
    return LoDTensor(data, lengths=recursive_seq_lens)


_DTYPE_BY_NAME = {name: to_dtype(name) for name in ("float32", "float64", "int32", "int64", "bool")}


def _check_feed(var: Variable, tensor: Any) -> None:
    shape = tuple(tensor.shape())
    expected = var.shape
    got_dtype = _DTYPE_BY_NAME[tensor.dtype()]
    if got_dtype != var.dtype:
        raise InvalidArgument(
            f"feed '{var.name}': got dtype {dtype_name(got_dtype)} with shape {list(shape)}, but "
            f"the variable is declared {dtype_name(var.dtype)} with shape {list(expected)}"
        )
    compatible = len(shape) == len(expected) and all(
        e < 0 or e == s for e, s in zip(expected, shape)
    )
    if not compatible:
        raise InvalidArgument(
            f"feed '{var.name}': got shape {list(shape)}, but the variable is declared with "
            f"shape {list(expected)} (-1 matches any size)"
        )
    if var.lod_level > 0 and not tensor.lod() and len(shape) > 0:
        # One row per sequence is the natural default for lod_level-1 inputs fed as arrays.
        tensor.set_lod_one_row_per_sequence()


def _to_tensor(name: str, value: Any, var: Variable) -> Any:
    if isinstance(value, _core.LoDTensor):
        return value
    array = np.asarray(value)
    if array.dtype == np.float64 and var.dtype != to_dtype(np.float64):
        raise InvalidArgument(
            f"feed '{name}': got a float64 array of shape {list(array.shape)}, but the variable "
            f"is declared {dtype_name(var.dtype)} with shape {list(var.shape)}; convert it with "
            f".astype(np.{dtype_name(var.dtype)})"
        )
    tensor = _core.LoDTensor()
    tensor.set(array)
    return tensor


def _dataset_pass(infer: bool, doc: str) -> Callable[..., DatasetRunResult]:
    """Executor.train_from_dataset and infer_from_dataset: Paddle's signature, written once."""

    def dataset_pass(
        self: "Executor",
        program: Program | None = None,
        dataset: Any = None,
        scope: Any = None,
        thread: int = 0,
        debug: bool = False,
        fetch_list: Sequence[Any] | None = None,
        fetch_info: Sequence[str] | None = None,
        print_period: int = 100,
        fetch_handler: Any = None,
        print_fn: Callable[[str], None] | None = None,
    ) -> DatasetRunResult:
        request = PassRequest(
            infer,
            program,
            dataset,
            scope,
            thread,
            debug,
            fetch_list,
            fetch_info,
            print_period,
            fetch_handler,
            print_fn,
        )
        return self._run_pass(request)

    dataset_pass.__name__ = dataset_pass.__qualname__ = (
        "infer_from_dataset" if infer else "train_from_dataset"
    )
    dataset_pass.__doc__ = doc
    return dataset_pass


class Executor:
    """Runs programs on a scope. `place` is CPUPlace() or CUDAPlace(i) (a GPU build and device:
    kernels run on the device's stream, feeds and fetches are copied; framework/executor.h).

    `resources`: the distributed resources its kernels see (PS communicator, collective group);
    by default the process's (`fleet.scope.default_resources()`), which `fleet.init_worker()`
    fills, so that an Executor made before or after init_worker runs distributed ops the same
    way."""

    def __init__(self, place: Any = None, seed: int = 0x5EED, resources: Any = None) -> None:
        cuda_device = -1
        if isinstance(place, CUDAPlace):
            if not _core.compiled_with_cuda:
                raise Unavailable(f"{place}: Fleet was built without CUDA")
            count = _core.cuda_device_count()
            if not 0 <= place.device_id < count:
                raise Unavailable(f"{place}: {count} CUDA device(s) visible")
            cuda_device = place.device_id
        self.place = place or CPUPlace()
        self._core = _core.Executor(seed=seed, cuda_device=cuda_device)
        self._core.resources = resources if resources is not None else default_resources()
        self._cache: dict[tuple, Any] = {}

    @property
    def seed(self) -> int:
        return self._core.seed

    @property
    def resources(self) -> Any:
        """The distributed resources (`_core.RuntimeResources`) this executor's kernels and step
        hooks see, in `run` and `train_from_dataset` alike. `fleet.init_worker()` fills the
        resources of every executor; set another object only between runs."""
        return self._core.resources

    @resources.setter
    def resources(self, value: Any) -> None:
        self._core.resources = value

    def run(
        self,
        program: Program | None = None,
        feed: Mapping[str, Any] | None = None,
        fetch_list: Sequence[Any] | None = None,
        scope: Any = None,
        return_numpy: bool = True,
        use_program_cache: bool = True,
    ) -> list[Any]:
        program = program if program is not None else default_main_program()
        scope = scope if scope is not None else global_scope()
        run_itself = getattr(program, "run_in_executor", None)
        if run_itself is not None:  # a program that is a service (DistributeTranspiler's
            return run_itself()  # pserver program: serves until the job stops)
        if isinstance(program, CompiledProgram) and program.is_data_parallel:
            return self._run_data_parallel(program, feed, fetch_list, scope, return_numpy)
        program = getattr(program, "program", program)  # a CompiledProgram without replicas
        feed = dict(feed or {})
        fetch_names = [f.name if isinstance(f, Variable) else str(f) for f in (fetch_list or [])]
        block = program.global_block()
        tensors = []
        for name, value in feed.items():
            if not block.has_var(name):
                raise NotFound(f"feed '{name}' is not a variable of the program")
            var = block.var(name)
            tensor = _to_tensor(name, value, var)
            _check_feed(var, tensor)
            tensors.append(tensor)
        for name in fetch_names:
            if not block.has_var(name):
                raise NotFound(f"fetch '{name}' is not a variable of the program")
        prepared = self._prepare(program, list(feed), fetch_names, use_program_cache)
        notify_run_listeners()
        fetched = self._core.run(prepared, scope, tensors, FEED_HOLDER, FETCH_HOLDER)
        notify_run_listeners()
        if not return_numpy:
            return list(fetched)
        return [t.numpy() for t in fetched]

    train_from_dataset = _dataset_pass(
        infer=False,
        doc="""Trains `program` (default: the default main program) over one pass of `dataset` in
        `thread` C++ trainer threads; returns a fleet.trainer.DatasetRunResult.

        thread: trainer threads; 0 takes the dataset's set_thread value. debug: also report the
        time spent per op role. fetch_list/fetch_info: variables (and their printed names) shown
        every print_period batches (0 = never). print_fn: called with each progress line instead of
        print (e.g. to record a training curve), on a trainer thread, one call at a time.
        fetch_handler: not supported (Unavailable names the alternative).""",
    )
    infer_from_dataset = _dataset_pass(
        infer=True,
        doc="""Like train_from_dataset, but runs the program's forward part only (a for_test clone:
        no backward or optimizer op runs, so parameters do not change).""",
    )

    def _run_pass(self, request: PassRequest) -> DatasetRunResult:
        """The driver of train_from_dataset / infer_from_dataset: one pass of the dataset in
        C++ trainer threads, on this executor's prepared program, seed and resources."""
        if isinstance(self.place, CUDAPlace):
            # The trainer threads would share the device's stream and cuBLAS handle, and its
            # fetch printing reads tensors on the host: not done yet (issue 26).
            raise Unavailable(
                f"train_from_dataset on {self.place} is not supported yet; feed the batches with "
                f"Executor.run on that place, or train from the dataset on CPUPlace()"
            )
        checked = check_pass(request)
        compiled = request.program
        if (
            isinstance(compiled, CompiledProgram)
            and compiled.is_data_parallel
            and not request.infer
        ):
            runner = self.data_parallel_runner(compiled, checked.scope)
            return runner.run_dataset(checked)
        prepared = self._prepare(checked.program, [], [], use_cache=True, holders=False)
        notify_run_listeners()
        raw = self._core.run_from_dataset(
            prepared,
            checked.scope,
            checked.dataset.pass_dataset(),
            checked.threads,
            checked.fetch_names,
            checked.fetch_labels,
            checked.print_period,
            checked.debug,
            checked.program.random_seed or self.seed,
            checked.print_fn,
        )
        notify_run_listeners()
        return pass_result(raw, checked.fetch_names)

    def data_parallel_runner(self, compiled: CompiledProgram, scope: Any) -> DataParallelRunner:
        """The replicas of a data-parallel program in `scope`: made on first use, kept (with
        their threads and scopes) until the program changes or close()."""
        key = ("data_parallel", id(compiled), id(scope))
        cached = self._cache.get(key)
        version = compiled.program.version
        if cached is not None and cached[0] is compiled and cached[1] == version:
            return cached[2]
        self._cache.pop(key, None)  # the replicas of an older plan end before new ones start
        seed = compiled.program.random_seed or self.seed
        runner = DataParallelRunner(self._core, compiled.plan(), scope, seed)
        self._cache[key] = (compiled, version, runner)
        return runner

    def _run_data_parallel(
        self,
        compiled: CompiledProgram,
        feed: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None,
        fetch_list: Sequence[Any] | None,
        scope: Any,
        return_numpy: bool,
    ) -> list[Any]:
        """Executor.run of a CompiledProgram with_data_parallel: `feed` is the whole batch
        (split across the replicas) or one dict a replica (Paddle's list feed)."""
        block = compiled.program.global_block()
        fetch_names = [f.name if isinstance(f, Variable) else str(f) for f in (fetch_list or [])]
        for name in fetch_names:
            if not block.has_var(name):
                raise NotFound(f"fetch '{name}' is not a variable of the program")

        def tensors(values: Mapping[str, Any]) -> dict[str, Any]:
            out = {}
            for name, value in values.items():
                if not block.has_var(name):
                    raise NotFound(f"feed '{name}' is not a variable of the program")
                out[name] = _to_tensor(name, value, block.var(name))
                _check_feed(block.var(name), out[name])
            return out

        whole = feed is None or isinstance(feed, Mapping)
        shares = tensors(feed or {}) if whole else [tensors(f) for f in feed]  # type: ignore
        runner = self.data_parallel_runner(compiled, scope)
        notify_run_listeners()
        fetched = runner.run(shares, fetch_names, return_numpy)
        notify_run_listeners()
        return fetched

    def _prepare(
        self,
        program: Program,
        feed_names: list[str],
        fetch_names: list[str],
        use_cache: bool,
        holders: bool = True,
    ) -> Any:
        """The prepared form of `program` plus feed/fetch ops (and, with `holders`, the feed and
        fetch holder variables), cached per program version and feed/fetch names."""
        key = (id(program), program.version, tuple(feed_names), tuple(fetch_names), holders)
        cached = self._cache.get(key) if use_cache else None
        if cached is not None and cached[0] is program:
            return cached[1]
        desc = pb.ProgramDesc()
        desc.CopyFrom(program.desc())
        block = desc.blocks[0]
        for holder in (FEED_HOLDER, FETCH_HOLDER) if holders else ():
            block.vars.add(name=holder, type=LOD_TENSOR_ARRAY, persistable=True)
        feed_ops = [
            Operator(
                None,
                "feed",
                {"X": [FEED_HOLDER]},
                {"Out": [name]},  # type: ignore[arg-type]
                {"col": i, "op_role": OP_ROLE_OTHER},
            ).to_desc()
            for i, name in enumerate(feed_names)
        ]
        ops = list(block.ops)
        del block.ops[:]
        block.ops.extend(feed_ops + ops)
        for i, name in enumerate(fetch_names):
            block.ops.append(
                Operator(
                    None,
                    "fetch",
                    {"X": [name]},
                    {"Out": [FETCH_HOLDER]},  # type: ignore[arg-type]
                    {"col": i, "op_role": OP_ROLE_OTHER},
                ).to_desc()
            )
        prepared = self._core.prepare(desc.SerializeToString(), 0)
        if use_cache:
            self._cache[key] = (program, prepared)
        return prepared

    def enable_profiling(self, on: bool = True) -> None:
        """Accumulate run time per op role (forward, backward, optimize) in C++."""
        self._core.set_profiling(on)

    def profile(self) -> dict[str, float]:
        """Op time by role in seconds (forward_s, backward_s, optimize_s, other_s) and the runs
        counted, since enable_profiling or reset_profile."""
        return profile_dict(self._core.stats())

    def reset_profile(self) -> None:
        self._core.reset_stats()

    def close(self) -> None:
        self._cache.clear()


def numpy_of(var: Any) -> np.ndarray:
    """The value of a scope variable as a NumPy array (dense even for SelectedRows)."""
    if var is None:
        raise NotFound("variable not found in scope")
    if var.is_selected_rows():
        return var.get_selected_rows().to_dense()
    return var.get_tensor().numpy()


__all__ = [
    "CPUPlace",
    "CUDAPlace",
    "Executor",
    "LoDTensor",
    "create_lod_tensor",
    "cuda_places",
    "global_scope",
    "scope_guard",
    "numpy_of",
    "numpy_dtype",
]
