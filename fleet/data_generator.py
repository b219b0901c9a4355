"""Write `pipe_command` readers in Python, as with Paddle's fleet.data_generator.

A reader script subclasses MultiSlotDataGenerator, turns one raw line into samples, and runs
from stdin; the dataset pipes every file through it and parses its MultiSlot output in C++:

    import fleet.data_generator as dg

    class Reader(dg.MultiSlotDataGenerator):
        def generate_sample(self, line):
            def local_iter():
                user, item, rating = line.split()
                yield [("user", [int(user)]), ("item", [int(item)]),
                       ("label", [int(float(rating) >= 4)])]
            return local_iter

    if __name__ == "__main__":
        Reader().run_from_stdin()

`generate_sample` may return a function producing samples (Paddle's style) or any iterable of
samples. A sample is a list (or tuple) of (slot name, values) pairs in the order the dataset's
`set_use_var` lists the variables; `generate_batch` may rework `set_batch` samples at once.
"""

from __future__ import annotations

import numbers
import os
import shlex
import sys
from typing import Any, Callable, Iterable, Iterator, Sequence, TextIO

from fleet.errors import InvalidArgument

Sample = Sequence[tuple[str, Sequence[Any]]]


def python_pipe_command(script: str | os.PathLike, *args: Any) -> str:
    """A pipe_command running `script` with this interpreter, with this `fleet` package
    importable in the child (its folder is prepended to PYTHONPATH)."""
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p)
    words = [sys.executable, os.fspath(script), *map(str, args)]
    return f"PYTHONPATH={shlex.quote(path)} " + " ".join(shlex.quote(w) for w in words)


class DataGenerator:
    """Base class: reads lines, calls generate_sample / generate_batch, writes _gen_str."""

    def __init__(self) -> None:
        self._proto_info: list[tuple[str, str]] | None = None
        self.batch_size_ = 32

    def set_batch(self, batch_size: int) -> None:
        """Samples handed to generate_batch at once."""
        if batch_size <= 0:
            raise InvalidArgument(f"batch size must be positive, got {batch_size}")
        self.batch_size_ = batch_size

    def generate_sample(
        self, line: str | None
    ) -> Callable[[], Iterable[Sample]] | Iterable[Sample]:
        raise NotImplementedError(
            "Please rewrite this function to return a list or tuple: "
            "[(name, [feasign, ...]), ...] or ((name, [feasign, ...]), ...)"
        )

    def generate_batch(self, samples: list[Sample]) -> Callable[[], Iterable[Sample]]:
        def local_iter() -> Iterator[Sample]:
            yield from samples

        return local_iter

    def run_from_stdin(self, stdin: TextIO | None = None, stdout: TextIO | None = None) -> None:
        """Converts every line of stdin and writes MultiSlot lines to stdout."""
        self._run((line for line in (stdin or sys.stdin)), stdout or sys.stdout)

    def run_from_memory(self, stdout: TextIO | None = None) -> None:
        """Writes the samples of generate_sample(None) (for debugging and benchmarks)."""
        self._run(iter([None]), stdout or sys.stdout)

    def _run(self, lines: Iterator[str | None], out: TextIO) -> None:
        batch: list[Sample] = []
        for line in lines:
            for sample in _samples(self.generate_sample(line)):
                if sample is None:
                    continue
                batch.append(sample)
                if len(batch) == self.batch_size_:
                    self._write_batch(batch, out)
                    batch = []
        if batch:
            self._write_batch(batch, out)
        out.flush()

    def _write_batch(self, batch: list[Sample], out: TextIO) -> None:
        out.write("".join(self._gen_str(s) for s in _samples(self.generate_batch(batch))))

    def _gen_str(self, line: Sample) -> str:
        raise NotImplementedError("use MultiSlotDataGenerator or MultiSlotStringDataGenerator")


def _samples(produced: Any) -> Iterable[Any]:
    return produced() if callable(produced) else produced


def _check_sample(line: Any) -> list:
    if isinstance(line, zip):
        line = list(line)
    if not isinstance(line, (list, tuple)):
        raise InvalidArgument(
            "a sample must be a list or tuple of (name, values) pairs, e.g. "
            f"[('words', [1926, 8, 17]), ('label', [1])]; got {line!r}"
        )
    return list(line)


class MultiSlotDataGenerator(DataGenerator):
    """Values are numbers: ints make an int64 (id) slot, any float makes a float32 slot.

    The first sample fixes the slot names and their order; later samples must match it.
    """

    def _gen_str(self, line: Sample) -> str:
        line = _check_sample(line)
        first = self._proto_info is None
        if first:
            self._proto_info = []
        elif len(line) != len(self._proto_info):
            raise InvalidArgument(
                f"a sample has {len(line)} slots but the first had "
                f"{len(self._proto_info)}: {[n for n, _ in self._proto_info]}"
            )
        parts = []
        for index, (name, elements) in enumerate(line):
            if first:
                if not isinstance(name, str):
                    raise InvalidArgument(f"slot name {name!r} must be a str")
                self._proto_info.append((name, "uint64"))
            elif name != self._proto_info[index][0]:
                raise InvalidArgument(
                    f"slot {index} is named {name!r} but the first sample named it "
                    f"{self._proto_info[index][0]!r}"
                )
            if not isinstance(elements, (list, tuple)):
                raise InvalidArgument(f"slot {name!r}: values must be a list, got {type(elements)}")
            if not elements:
                raise InvalidArgument(
                    f"slot {name!r} is empty; pad it (e.g. with id 0) in generate_sample"
                )
            parts.append(str(len(elements)))
            for elem in elements:
                if isinstance(elem, bool) or not isinstance(elem, numbers.Real):
                    raise InvalidArgument(
                        f"slot {name!r}: value {elem!r} must be an int or a float"
                    )
                if isinstance(elem, numbers.Integral):
                    parts.append(str(int(elem)))
                else:
                    self._proto_info[index] = (name, "float")
                    # str() is the shortest repr that reads back to the same float.
                    parts.append(str(elem))
        return " ".join(parts) + "\n"


class MultiSlotStringDataGenerator(DataGenerator):
    """Values are already strings (no type checks): the fast path for pre-formatted ids."""

    def _gen_str(self, line: Sample) -> str:
        parts = []
        for name, elements in _check_sample(line):
            if not elements:
                raise InvalidArgument(f"slot {name!r} is empty; pad it in generate_sample")
            parts.append(str(len(elements)))
            parts.extend(elements)
        return " ".join(parts) + "\n"


__all__ = [
    "DataGenerator",
    "MultiSlotDataGenerator",
    "MultiSlotStringDataGenerator",
    "python_pipe_command",
]
