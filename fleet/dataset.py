"""Datasets for `train_from_dataset` / `infer_from_dataset`, with fluid's API.

    dataset = fleet.DatasetFactory().create_dataset("QueueDataset")   # or "InMemoryDataset"
    dataset.set_use_var([dense, c1, ..., c26, label])
    dataset.set_pipe_command("python reader.py")   # optional: each file is piped through it
    dataset.set_batch_size(512)
    dataset.set_thread(2)
    dataset.set_filelist(files)

Files hold Paddle's MultiSlot text format: per line, for each used variable in order, a count
and that many values (int64 ids or float32 values). Reading and parsing run in C++ reader
threads; a `pipe_command` runs through `/bin/sh -c` with the file as its stdin (write one with
`fleet.data_generator`). "cat", Paddle's default, is recognised and skipped. Settings are read
when a pass starts (QueueDataset) or at `load_into_memory` (InMemoryDataset; only the batch
size and thread count may change afterwards).

Malformed lines raise `fleet.errors.InvalidArgument` naming the file, line and slot, unless
`set_skip_bad_lines(True)`: then they are counted and the count is reported after the pass.
Any bytes may appear in a line: those that are not printable UTF-8 (NUL included) are shown as
\\xNN in the message.

A pipe_command runs in its own process group that dies with the training process (even on
SIGKILL) and is killed when a pass is cancelled (Ctrl-C in train_from_dataset or
load_into_memory). One that writes nothing for `set_pipe_command_timeout` seconds (600 by
default) is killed and fails the pass with `fleet.errors.Timeout` naming the file and the
command. One that writes nothing at all for a non-empty file gets a RuntimeWarning naming it.

`set_feed_priority` (a Fleet extension) sets the CPU scheduling of a pass's feed threads (queue
readers, in-memory producers) and of the pipe_commands they start: "normal"; "batch"
(SCHED_BATCH: a normal share of the CPU, but waking up does not preempt a running thread);
"low" (nice 19); "idle" (SCHED_IDLE: only CPU time nothing else wants). Default FEED_PRIORITY.
A feed only has to stay ahead of its trainer; on a machine whose cores the trainers fill (a
worker or replica per core), a normal feed that wakes takes a core from a computing trainer,
and a sync step or an allreduce waits for the slowest trainer (csrc/core/thread_priority.h).
A system that refuses the change leaves the threads as they were, with one RuntimeWarning a pass.
"""

from __future__ import annotations

import os
import random
import threading
from typing import Any, Callable, Sequence

from fleet import _core
from fleet._dtypes import FLOAT32, INT64, dtype_name
from fleet.errors import InvalidArgument, Unavailable
from fleet.framework import Variable

Exchange = Callable[[list], list]

FEED_PRIORITIES = ("normal", "batch", "low", "idle")
FEED_PRIORITY = "normal"


def _positive_int(what: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidArgument(f"{what} must be a positive integer, got {value!r}")
    return value


class DatasetBase:
    """Settings shared by both datasets (fluid's DatasetBase)."""

    def __init__(self) -> None:
        self._use_vars: list[Variable] = []
        self._pipe_command = "cat"
        self._batch_size = 1
        self._thread = 1
        self._filelist: list[str] = []
        self._skip_bad_lines = False
        self._pipe_command_timeout_s = 600.0
        self._feed_priority = FEED_PRIORITY

    # The paddle.distributed.QueueDataset/InMemoryDataset (2.x) way to set everything at once.
    def init(
        self,
        batch_size: int = 1,
        thread_num: int = 1,
        use_var: Sequence[Variable] | None = None,
        pipe_command: str = "cat",
        **unsupported: Any,
    ) -> None:
        ignored = {
            k: v
            for k, v in unsupported.items()
            if k not in ("input_type", "fs_name", "fs_ugi", "download_cmd")
            or v not in (0, "", "cat")
        }
        if ignored:
            raise InvalidArgument(
                f"dataset.init: unsupported settings {sorted(ignored)} "
                "(HDFS and custom input types are not available in Fleet)"
            )
        self.set_batch_size(batch_size)
        self.set_thread(thread_num)
        self.set_use_var(list(use_var or []))
        self.set_pipe_command(pipe_command)

    def set_pipe_command(self, pipe_command: str) -> None:
        """Shell command each file is piped through (stdin: the file; stdout: MultiSlot lines)."""
        if not isinstance(pipe_command, str):
            raise InvalidArgument(f"pipe_command must be a string, got {pipe_command!r}")
        self._pipe_command = pipe_command

    def set_pipe_command_timeout(self, seconds: float) -> None:
        """Fleet extension: how long a pipe_command may write nothing before it is killed and
        the pass fails with fleet.errors.Timeout naming the file and the command."""
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, (int, float))
            or not 0 < seconds < 1e9
        ):
            raise InvalidArgument(
                f"pipe_command timeout must be a positive number of seconds, got {seconds!r}"
            )
        self._pipe_command_timeout_s = float(seconds)

    def set_batch_size(self, batch_size: int) -> None:
        self._batch_size = _positive_int("batch_size", batch_size)

    def set_thread(self, thread_num: int) -> None:
        """Reader threads (and the default trainer thread count of train_from_dataset)."""
        self._thread = _positive_int("thread_num", thread_num)

    def set_filelist(self, filelist: Sequence[str]) -> None:
        if isinstance(filelist, (str, bytes)) or not all(
            isinstance(f, (str, os.PathLike)) for f in filelist
        ):
            raise InvalidArgument(f"filelist must be a list of paths, got {filelist!r}")
        self._filelist = [os.fspath(f) for f in filelist]

    def set_use_var(self, var_list: Sequence[Variable]) -> None:
        """The variables each line fills, in line order: int64 or float32; lod_level 0 (dense,
        a fixed number of values per sample) or 1 (any positive number of values)."""
        for var in var_list:
            if not isinstance(var, Variable):
                raise InvalidArgument(f"set_use_var takes program variables, got {var!r}")
            if var.dtype not in (INT64, FLOAT32):
                raise InvalidArgument(
                    f"variable '{var.name}' is {dtype_name(var.dtype)}; "
                    "datasets feed int64 and float32 variables only"
                )
        self._use_vars = list(var_list)

    def set_skip_bad_lines(self, skip: bool = True) -> None:
        """Fleet extension: count and skip malformed lines instead of failing on the first."""
        self._skip_bad_lines = bool(skip)

    def set_feed_priority(self, priority: str) -> None:
        """Fleet extension: the CPU scheduling of a pass's feed threads, one of FEED_PRIORITIES
        (the module's doc says what each does and why). Results do not depend on it, only
        speed. Read when a pass starts (QueueDataset) or begins (InMemoryDataset)."""
        if priority not in FEED_PRIORITIES:
            raise InvalidArgument(
                f"feed priority must be one of {', '.join(FEED_PRIORITIES)}, got {priority!r}"
            )
        self._feed_priority = priority

    def set_hdfs_config(self, fs_name: str, fs_ugi: str) -> None:
        raise Unavailable("set_hdfs_config: Fleet datasets read local files only")

    def get_filelist(self) -> list[str]:
        return list(self._filelist)

    @property
    def thread_num(self) -> int:
        return self._thread

    @property
    def batch_size(self) -> int:
        return self._batch_size

    @property
    def use_vars(self) -> list[Variable]:
        return list(self._use_vars)

    def desc(self) -> str:
        slots = ", ".join(
            f"{v.name}:{dtype_name(v.dtype)}{'[lod]' if v.lod_level else ''}"
            for v in self._use_vars
        )
        return (
            f"{type(self).__name__}(batch_size={self._batch_size}, thread={self._thread}, "
            f"pipe_command={self._pipe_command!r}, files={len(self._filelist)}, "
            f"slots=[{slots}], skip_bad_lines={self._skip_bad_lines})"
        )

    __repr__ = desc

    def _slots(self) -> list[tuple]:
        if not self._use_vars:
            raise InvalidArgument(f"{type(self).__name__}: call set_use_var before training")
        return [(v.name, v.dtype, v.lod_level, list(v.shape)) for v in self._use_vars]

    def _core_args(self) -> dict[str, Any]:
        if not self._filelist:
            raise InvalidArgument(
                f"{type(self).__name__}: the file list is empty (call "
                "set_filelist with at least one file)"
            )
        return dict(
            slots=self._slots(),
            batch_size=self._batch_size,
            threads=self._thread,
            pipe_command=self._pipe_command,
            skip_bad_lines=self._skip_bad_lines,
            files=self._filelist,
            pipe_command_timeout_s=self._pipe_command_timeout_s,
            feed_priority=self._feed_priority,
        )

    def pass_dataset(self) -> Any:
        """The C++ dataset (fleet._core) one train_from_dataset pass reads, made from this
        object's settings: the executors and the data-parallel runner call it, once per pass.
        A QueueDataset makes a fresh stream of its files; an InMemoryDataset hands over what
        load_into_memory() read (InvalidArgument before that)."""
        raise NotImplementedError


class QueueDataset(DatasetBase):
    """Streams the files on every pass: nothing is kept in memory."""

    def pass_dataset(self) -> Any:
        return _core.QueueDataset(**self._core_args())

    def local_shuffle(self) -> None:
        raise InvalidArgument("QueueDataset does not shuffle; use InMemoryDataset")

    def global_shuffle(self, fleet: Any = None) -> None:
        raise InvalidArgument("QueueDataset does not shuffle; use InMemoryDataset")


class InMemoryDataset(DatasetBase):
    """Parses the files once into memory; shuffles locally or across workers."""

    def __init__(self) -> None:
        super().__init__()
        self._core: Any = None
        self._preload: tuple[threading.Thread, list] | None = None
        self.load_stats: dict[str, Any] = {}

    def load_into_memory(self) -> None:
        """Parses every file (with set_thread reader threads), appending to memory."""
        if self._core is None:
            self._core = _core.InMemoryDataset(**self._core_args())
        elif [s[0] for s in self._slots()] != list(self._core.slot_names):
            raise InvalidArgument(
                "InMemoryDataset: set_use_var changed after "
                "load_into_memory; call release_memory first"
            )
        stats = self._core.load_into_memory()
        # A dict, as Paddle users read it; the fields of _core.ReadStats.
        self.load_stats = {
            name: getattr(stats, name)
            for name in ("files", "lines", "samples", "bad_lines", "bytes", "interrupted")
        }
        self.load_stats["bad_line_examples"] = list(stats.bad_line_examples)
        if self.load_stats["bad_lines"]:
            print(
                f"load_into_memory: skipped {self.load_stats['bad_lines']} malformed lines "
                f"(skip_bad_lines); first: {self.load_stats['bad_line_examples'][0]}",
                flush=True,
            )

    def preload_into_memory(self, thread_num: int | None = None) -> None:
        """load_into_memory in a background thread; finish with wait_preload_done()."""
        if thread_num is not None:
            self.set_thread(thread_num)
        errors: list[BaseException] = []

        def load() -> None:
            try:
                self.load_into_memory()
            except BaseException as exc:  # re-raised by wait_preload_done
                errors.append(exc)

        thread = threading.Thread(target=load, name="fleet-preload", daemon=True)
        thread.start()
        self._preload = (thread, errors)

    def wait_preload_done(self) -> None:
        if self._preload is None:
            raise InvalidArgument("wait_preload_done: preload_into_memory was not called")
        thread, errors = self._preload
        thread.join()
        self._preload = None
        if errors:
            raise errors[0]

    def local_shuffle(self, seed: int | None = None) -> None:
        """Shuffles the samples in memory; a given seed reproduces the order."""
        self._loaded("local_shuffle").local_shuffle(
            seed if seed is not None else random.SystemRandom().getrandbits(63)
        )

    def global_shuffle(
        self,
        fleet: Any = None,
        thread_num: int = 12,
        seed: int | None = None,
        exchange: Exchange | None = None,
        rank: int | None = None,
        world_size: int | None = None,
    ) -> None:
        """Sends every sample to a random worker, then shuffles locally.

        Workers and transport come from `fleet` (worker_index(), worker_num() and
        fleet.util.all_to_all_bytes over the workers' Gloo group) or from `exchange` with `rank` and
        `world_size`. Without either it shuffles locally through the same path.
        `thread_num` is accepted for fluid compatibility.
        """
        if fleet is not None:
            rank, world_size = fleet.worker_index(), fleet.worker_num()
            util = getattr(fleet, "util", fleet)
            exchange = exchange or getattr(util, "all_to_all_bytes", None)
            if exchange is None and world_size > 1:
                raise Unavailable(
                    "global_shuffle across workers needs fleet.all_to_all_bytes "
                    "(the parameter-server or collective runtime)"
                )
        if exchange is None:
            if world_size not in (None, 1):
                raise InvalidArgument("global_shuffle: world_size > 1 needs an exchange")
            rank, world_size = 0, 1
            exchange = list
        if rank is None or world_size is None:
            raise InvalidArgument("global_shuffle with an exchange needs rank and world_size")
        self._loaded("global_shuffle").global_shuffle(
            rank,
            world_size,
            exchange,
            seed if seed is not None else random.SystemRandom().getrandbits(63),
        )

    def get_memory_data_size(self, fleet: Any = None) -> int:
        """Samples in memory (summed over workers when `fleet` is given)."""
        local = self._core.memory_data_size() if self._core is not None else 0
        if fleet is None or fleet.worker_num() == 1:
            return local
        util = getattr(fleet, "util", None)
        if util is None or not hasattr(util, "all_reduce"):
            raise Unavailable("get_memory_data_size(fleet): fleet.util.all_reduce is needed")
        return int(util.all_reduce([local], "sum")[0])

    def get_shuffle_data_size(self, fleet: Any = None) -> int:
        return self.get_memory_data_size(fleet)

    def get_memory_bytes(self) -> int:
        """Fleet extension: bytes of sample data held in memory."""
        return self._core.memory_bytes() if self._core is not None else 0

    def release_memory(self) -> None:
        if self._core is not None:
            self._core.release_memory()
        self._core = None

    def _loaded(self, what: str) -> Any:
        if self._core is None:
            raise InvalidArgument(f"InMemoryDataset.{what}: call load_into_memory() first")
        return self._core

    def pass_dataset(self) -> Any:
        core = self._loaded("train_from_dataset")
        core.set_batching(self._batch_size, self._thread)
        return core


class DatasetFactory:
    """fluid.DatasetFactory: create_dataset("QueueDataset" | "InMemoryDataset")."""

    _CLASSES = {"QueueDataset": QueueDataset, "InMemoryDataset": InMemoryDataset}

    def create_dataset(self, datafeed_class: str = "QueueDataset") -> DatasetBase:
        if datafeed_class not in self._CLASSES:
            raise InvalidArgument(
                f"datafeed class {datafeed_class!r} does not exist; use one "
                f"of {sorted(self._CLASSES)}"
            )
        return self._CLASSES[datafeed_class]()


__all__ = ["DatasetBase", "DatasetFactory", "InMemoryDataset", "QueueDataset"]
