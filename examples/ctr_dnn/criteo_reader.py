"""Reader for raw Criteo Display Advertising files, shared by every CTR-DNN script.

Format (one example per line, LF endings, 40 TAB-separated fields, empty field = missing):
``label`` (0/1), ``I1..I13`` (integer counts, may be negative), ``C1..C26`` (8 hex digits).

Features follow PaddleRec's CTR-DNN preprocessing so that Fleet and its Paddle peer train on
identical inputs:

* dense float32 [N, 13]: ``log(1 + max(x, 0))``, missing = 0;
* sparse int64 [N, 26]: each categorical string hashed together with its slot index into
  ``[0, sparse_dim)``, so equal strings in different slots get different ids; a missing value maps
  to one fixed id per slot;
* label int64 [N, 1].

Parsing is vectorised over a whole file (no per-line Python loop), so a 200k-row file takes a
couple of seconds. Malformed input raises ``ValueError`` naming the file, the 1-based line number
and the field.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from collections.abc import Iterator, Sequence

import numpy as np

NUM_DENSE = 13
NUM_SPARSE = 26
NUM_FIELDS = 1 + NUM_DENSE + NUM_SPARSE
DEFAULT_SPARSE_DIM = 1_000_001  # PaddleRec's sparse_feature_dim for Criteo
HEX_WIDTH = 8
# Longest integer field accepted: 18 digits always fits in int64.
MAX_INT_DIGITS = 18
# Lines parsed per vectorised step; bounds the size of the gathered byte matrices.
CHUNK_LINES = 1 << 16

_TAB = 9
_NEWLINE = 10
_MINUS = ord("-")
_BAD = 255  # lookup-table value for a byte that is not a digit of the base in question
# Zero bytes appended to every buffer, so fixed-width gathers past the last field stay in bounds.
_PAD = 32


def _digit_table(alphabet: str) -> np.ndarray:
    table = np.full(256, _BAD, dtype=np.uint8)
    for value, char in enumerate(alphabet):
        table[ord(char)] = value
        table[ord(char.upper())] = value
    return table


_DEC = _digit_table("0123456789")
_HEX = _digit_table("0123456789abcdef")
# Flag bit that keeps "missing" keys apart from every real 32-bit hex value before hashing.
_MISSING_FLAG = np.uint64(1 << 40)


def field_name(index: int) -> str:
    """Criteo's column name for 0-based field ``index``: label, I1..I13, C1..C26."""
    if index == 0:
        return "label"
    if index <= NUM_DENSE:
        return f"I{index}"
    return f"C{index - NUM_DENSE}"


@dataclasses.dataclass
class CriteoArrays:
    """Parsed examples. All arrays have the same first dimension N."""

    dense: np.ndarray  # float32 [N, 13], log-transformed counts
    sparse: np.ndarray  # int64 [N, 26], hashed ids in [0, sparse_dim)
    label: np.ndarray  # int64 [N, 1], 0 or 1

    def __len__(self) -> int:
        return int(self.label.shape[0])

    def take(self, index: np.ndarray | slice) -> CriteoArrays:
        """Rows selected by ``index`` (a slice gives views, an index array gives copies)."""
        return CriteoArrays(self.dense[index], self.sparse[index], self.label[index])


def mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser (Steele et al., "Fast splittable PRNGs", OOPSLA 2014), vectorised.

    Used to hash (slot, value) keys; a full-avalanche mix makes ``% sparse_dim`` uniform.
    """
    z = x.astype(np.uint64, copy=True)
    with np.errstate(over="ignore"):
        z += np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def hash_sparse(values: np.ndarray, missing: np.ndarray, sparse_dim: int) -> np.ndarray:
    """Hashes raw 32-bit categorical values [N, 26] (with a missing mask) to ids in [0, sparse_dim).

    The key is ``(slot + 1) << 32 | value``; missing cells use ``(slot + 1) << 32 | 1 << 40``,
    which no hex value can produce, so each slot has one fixed "missing" id.
    """
    slots = (np.arange(values.shape[1], dtype=np.uint64) + np.uint64(1)) << np.uint64(32)
    keys = values.astype(np.uint64) | slots
    keys = np.where(missing, slots | _MISSING_FLAG, keys)
    return (mix64(keys) % np.uint64(sparse_dim)).astype(np.int64)


def read_criteo(
    path_or_paths: str | os.PathLike | Sequence[str | os.PathLike],
    sparse_dim: int = DEFAULT_SPARSE_DIM,
) -> CriteoArrays:
    """Parses one or more Criteo-format files into arrays, concatenated in the given order.

    Raises ``ValueError`` on the first malformed line (wrong field count, non-integer count,
    bad hex, label not 0/1), naming the file, the 1-based line number and the field.
    """
    if sparse_dim < NUM_SPARSE + 1:
        raise ValueError(f"sparse_dim={sparse_dim} is too small (need > {NUM_SPARSE})")
    if isinstance(path_or_paths, (str, os.PathLike)):
        paths = [path_or_paths]
    else:
        paths = list(path_or_paths)
    if not paths:
        raise ValueError("read_criteo: no input files given")
    parts = [_read_file(os.fspath(p), sparse_dim) for p in paths]
    return CriteoArrays(
        dense=np.concatenate([p.dense for p in parts]),
        sparse=np.concatenate([p.sparse for p in parts]),
        label=np.concatenate([p.label for p in parts]),
    )


def iterate_batches(
    arrays: CriteoArrays,
    batch_size: int,
    shuffle: bool = False,
    seed: int = 0,
    drop_last: bool = False,
) -> Iterator[CriteoArrays]:
    """Yields consecutive batches of ``batch_size`` rows (the last may be shorter).

    With ``shuffle`` the rows are permuted once per call with ``seed``; without it the batches are
    views into ``arrays``. With ``drop_last`` a final short batch is skipped.
    """
    if batch_size <= 0:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    n = len(arrays)
    order = np.random.default_rng(seed).permutation(n) if shuffle else None
    for start in range(0, n, batch_size):
        stop = min(start + batch_size, n)
        if drop_last and stop - start < batch_size:
            return
        yield arrays.take(slice(start, stop) if order is None else order[start:stop])


def _read_file(path: str, sparse_dim: int) -> CriteoArrays:
    with open(path, "rb") as f:
        raw = f.read()
    if raw and not raw.endswith(b"\n"):
        raw += b"\n"
    data = np.frombuffer(raw + bytes(_PAD), dtype=np.uint8)
    body = data[: len(raw)]
    newlines = np.flatnonzero(body == _NEWLINE)
    seps = np.flatnonzero((body == _TAB) | (body == _NEWLINE))
    _check_field_counts(path, data, seps)
    # Every line has exactly 40 separators now, so they reshape to one row per line.
    seps = seps.reshape(-1, NUM_FIELDS)
    starts = np.empty_like(seps)
    starts[:, 0] = np.concatenate(([0], newlines[:-1] + 1))
    starts[:, 1:] = seps[:, :-1] + 1
    out = []
    for lo in range(0, seps.shape[0], CHUNK_LINES):
        hi = min(lo + CHUNK_LINES, seps.shape[0])
        out.append(_parse_chunk(path, data, starts[lo:hi], seps[lo:hi], lo, sparse_dim))
    if not out:
        empty = np.zeros((0, NUM_DENSE), np.float32)
        return CriteoArrays(empty, np.zeros((0, NUM_SPARSE), np.int64), np.zeros((0, 1), np.int64))
    return CriteoArrays(
        dense=np.concatenate([o.dense for o in out]),
        sparse=np.concatenate([o.sparse for o in out]),
        label=np.concatenate([o.label for o in out]),
    )


def _check_field_counts(path: str, data: np.ndarray, seps: np.ndarray) -> None:
    # Separators per line = distance between consecutive newlines in the separator list.
    ends = np.flatnonzero(data[seps] == _NEWLINE)
    counts = np.diff(ends, prepend=-1)
    bad = np.flatnonzero(counts != NUM_FIELDS)
    if bad.size:
        line = int(bad[0])
        raise ValueError(
            f"{path}:{line + 1}: expected {NUM_FIELDS} TAB-separated fields, got {counts[line]}"
        )


def _gather(data: np.ndarray, starts: np.ndarray, width: int) -> np.ndarray:
    """``width`` bytes from each field start, [..., width]; bytes past a field's end are whatever
    follows it (callers mask by length). Needs ``width <= _PAD`` past the last field."""
    return data[starts[..., None] + np.arange(width)]


def _fail(path: str, first_line: int, bad: np.ndarray, column0: int, what: str) -> None:
    row, col = np.argwhere(bad)[0]
    field = field_name(int(col) + column0)
    raise ValueError(f"{path}:{first_line + int(row) + 1}: field {field}: {what}")


def _parse_chunk(
    path: str,
    data: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    first_line: int,
    sparse_dim: int,
) -> CriteoArrays:
    lengths = ends - starts
    label = _parse_label(path, data, starts[:, 0], lengths[:, 0], first_line)
    dense_sl = slice(1, 1 + NUM_DENSE)
    counts = _parse_ints(path, data, starts[:, dense_sl], lengths[:, dense_sl], first_line)
    dense = np.log1p(np.maximum(counts, 0)).astype(np.float32)
    sparse_sl = slice(1 + NUM_DENSE, NUM_FIELDS)
    values, missing = _parse_hex(
        path, data, starts[:, sparse_sl], lengths[:, sparse_sl], first_line
    )
    return CriteoArrays(dense, hash_sparse(values, missing, sparse_dim), label)


def _parse_label(
    path: str, data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, first_line: int
) -> np.ndarray:
    first = data[starts]
    bad = (lengths != 1) | ((first != ord("0")) & (first != ord("1")))
    if bad.any():
        _fail(path, first_line, bad[:, None], 0, "label must be 0 or 1")
    return (first - ord("0")).astype(np.int64).reshape(-1, 1)


def _parse_ints(
    path: str, data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, first_line: int
) -> np.ndarray:
    """Integer counts [n, 13] as float64 (missing = 0, the value the log transform maps to 0)."""
    # Bound the gathered width before looking at the characters; refined below.
    too_long = lengths > MAX_INT_DIGITS + 1
    if too_long.any():
        _fail(path, first_line, too_long, 1, f"integer longer than {MAX_INT_DIGITS} digits")
    width = max(int(lengths.max(initial=0)), 1)
    chars = _gather(data, starts, width)
    negative = (chars[..., 0] == _MINUS) & (lengths > 0)
    digits = _DEC[chars]
    position = np.arange(width)
    # Character k is a digit slot if it lies inside the field and is not the leading '-'.
    in_number = (position < lengths[..., None]) & (position >= negative[..., None])
    bad = (in_number & (digits == _BAD)).any(axis=-1) | (negative & (lengths < 2))
    if bad.any():
        _fail(path, first_line, bad, 1, "not an integer")
    too_long = lengths - negative > MAX_INT_DIGITS
    if too_long.any():
        _fail(path, first_line, too_long, 1, f"integer longer than {MAX_INT_DIGITS} digits")
    values = np.zeros(lengths.shape, dtype=np.int64)
    for k in range(width):  # Horner's rule, one character column at a time
        values = np.where(in_number[..., k], values * 10 + digits[..., k], values)
    return np.where(negative, -values, values).astype(np.float64)


def _parse_hex(
    path: str, data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, first_line: int
) -> tuple[np.ndarray, np.ndarray]:
    """32-bit values [n, 26] and a missing mask; values are 0 where missing."""
    missing = lengths == 0
    bad_len = ~missing & (lengths != HEX_WIDTH)
    if bad_len.any():
        _fail(path, first_line, bad_len, 1 + NUM_DENSE, f"expected {HEX_WIDTH} hex digits")
    nibbles = _HEX[_gather(data, starts, HEX_WIDTH)]
    bad = ~missing & (nibbles == _BAD).any(axis=-1)
    if bad.any():
        _fail(path, first_line, bad, 1 + NUM_DENSE, "bad hex digit")
    values = np.zeros(lengths.shape, dtype=np.uint64)
    for k in range(HEX_WIDTH):
        values = (values << np.uint64(4)) | nibbles[..., k]
    values[missing] = 0
    return values, missing


# --- One line at a time: the pipe_command reader of train_from_dataset -----------------------

_MASK64 = (1 << 64) - 1
# The MultiSlot slots a pipe reader writes, in the order of the dataset's set_use_var.
MULTISLOT_SLOTS = ("dense_input", *(f"C{i + 1}" for i in range(NUM_SPARSE)), "label")


def _mix64_int(x: int) -> int:
    """mix64 for one Python int (same constants, same result as the vectorised form)."""
    z = (x + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def parse_line(line: str, sparse_dim: int) -> tuple[list[float], list[int], int]:
    """One raw Criteo line as (13 dense floats, 26 hashed ids, label), with the features of
    ``read_criteo``; ValueError names the field at fault (the caller adds where the line is)."""
    fields = line.rstrip("\r\n").split("\t")
    if len(fields) != NUM_FIELDS:
        raise ValueError(f"expected {NUM_FIELDS} TAB-separated fields, got {len(fields)}")
    if fields[0] not in ("0", "1"):
        raise ValueError(f"field label: label must be 0 or 1, got {fields[0]!r}")
    dense = []
    for i in range(1, 1 + NUM_DENSE):
        text = fields[i]
        try:
            count = int(text) if text else 0
        except ValueError:
            raise ValueError(f"field {field_name(i)}: not an integer: {text!r}") from None
        dense.append(math.log1p(count) if count > 0 else 0.0)
    ids = []
    for slot in range(NUM_SPARSE):
        text = fields[1 + NUM_DENSE + slot]
        key = (slot + 1) << 32
        if not text:
            key |= 1 << 40
        else:
            if len(text) != HEX_WIDTH:
                raise ValueError(
                    f"field C{slot + 1}: expected {HEX_WIDTH} hex digits, got {text!r}"
                )
            try:
                key |= int(text, 16)
            except ValueError:
                raise ValueError(f"field C{slot + 1}: bad hex digit in {text!r}") from None
        ids.append(_mix64_int(key) % sparse_dim)
    return dense, ids, int(fields[0])


def make_pipe_reader(sparse_dim: int = DEFAULT_SPARSE_DIM):  # noqa: ANN201 (a local class)
    """A ``fleet.data_generator.MultiSlotDataGenerator`` turning raw Criteo lines into the
    MultiSlot slots ``MULTISLOT_SLOTS``; ``python criteo_reader.py`` runs it as a pipe_command.
    fleet is imported here, not at the top, because the Paddle peer imports this module too."""
    from fleet.data_generator import MultiSlotDataGenerator

    class CriteoPipeReader(MultiSlotDataGenerator):
        def __init__(self) -> None:
            super().__init__()
            self.line_number = 0

        def generate_sample(self, line: str):  # noqa: ANN202
            self.line_number += 1
            if not line.strip():
                return []
            try:
                dense, ids, label = parse_line(line, sparse_dim)
            except ValueError as e:
                raise ValueError(f"line {self.line_number} of the input: {e}") from None
            sample = [(MULTISLOT_SLOTS[0], dense)]
            sample += [(name, [i]) for name, i in zip(MULTISLOT_SLOTS[1:-1], ids)]
            sample.append((MULTISLOT_SLOTS[-1], [label]))
            return [sample]

    return CriteoPipeReader()


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        description="pipe_command reader: raw Criteo lines on stdin, MultiSlot lines on stdout "
        "(slots: dense_input[13], C1..C26, label)."
    )
    parser.add_argument(
        "--sparse_dim",
        type=int,
        default=DEFAULT_SPARSE_DIM,
        help="size of the hashed id space (rows of the embedding table)",
    )
    args = parser.parse_args(argv)
    try:
        make_pipe_reader(args.sparse_dim).run_from_stdin()
    except ValueError as e:
        print(f"criteo_reader: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
