"""Exporting a parameter-server model for serving in one process without servers:
``fleet.save_inference_model`` (workers) and ``fleet.load_inference_model`` (anywhere).

An exported directory holds:

* ``__model__``: the forward program (a ProgramDesc) pruned to what computes the targets from
  the fed variables, with every ``pull_sparse`` replaced one for one by ``lookup_sparse_rows``
  (csrc/operators/keyed_lookup_ops.cc), which reads a local copy of the table;
* ``__meta__.json``: the fed names and target names, in order;
* ``params.npz``: the dense parameters the program reads (worker 0's values after a flush:
  the servers' values) and, per sparse table, ``<param>@KEYS`` (int64, sorted) and
  ``<param>@ROWS`` ([rows, dim] float32, values only: no update-rule state).

Sparse rows: all rows the servers hold when the export runs. Ids stay raw int64 of any value:
the local lookup binary-searches the saved keys, so no remapping of the fed ids is needed. An id
the servers never saw reads as zeros (as a key held back by the count filter does), where a
PS job would have created it with the initializer; rows created by the PS job's own evaluation
pulls are exported, so predictions on data the job evaluated are the same.

The rows are read from a base save of the tables into ``<dirname>/tables`` (the checkpoint
format of csrc/ps/checkpoint.h; each part file is a 72-byte header, then per row an int64 key
and ``row_floats`` float32 of which the first ``dim`` are the value).

Caveat: that save ends a save cycle on the servers, as any save does (csrc/ps/sparse_table.h):
the job's next delta save holds the rows changed since the export, and shrink counts the export
as a save. Export right after a save_persistables (nothing trained in between: nothing lost), or
take a base save after exporting.
"""

from __future__ import annotations

import os
import shutil
from typing import Any, Optional, Sequence

import numpy as np

from fleet import model_files
from fleet.errors import InvalidArgument
from fleet.framework import OP_ROLE_ATTR, OP_ROLE_FORWARD, Program, Variable

# The export's files and pruning are fleet.io's (one format for both loaders); re-exported for
# the modules that read them from here.
from fleet.model_files import META_FILE, MODEL_FILE, PARAMS_FILE, prune
from fleet.ps.checkpoint import part_paths
from fleet.ps.client import PsClient
from fleet.ps.program_pass import PsPlan
from fleet.scope import global_scope

TABLES_DIR = "tables"
_HEADER = np.dtype(
    [
        ("magic", "S8"),
        ("version", "<u4"),
        ("table_id", "<u4"),
        ("table_type", "<u4"),
        ("save_mode", "<u4"),
        ("rule", "<u4"),
        ("block_size", "<u4"),
        ("dim", "<u8"),
        ("row_floats", "<u8"),
        ("row_count", "<u8"),
        ("epoch", "<u8"),
        ("checksum", "<u4"),
        ("reserved", "<u4"),
    ]
)
assert _HEADER.itemsize == 72


def read_sparse_values(paths: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Keys (sorted) and value rows of the sparse table parts `paths`, applied in order (a later
    part's row replaces an earlier one, as a load does). Refuses a file that is not a sparse
    part, naming it."""
    keys_parts, rows_parts = [], []
    dim = None
    for path in paths:
        with open(path, "rb") as f:
            header = np.frombuffer(f.read(_HEADER.itemsize), dtype=_HEADER)
            if header.size != 1 or header["magic"][0] != b"FLEETPS":
                raise InvalidArgument(f"{path} is not a Fleet table part (bad magic)")
            h = header[0]
            if int(h["table_type"]) != 1:
                raise InvalidArgument(f"{path} is not a sparse table part")
            dim, width = int(h["dim"]), int(h["row_floats"])
            record = np.dtype([("key", "<i8"), ("data", "<f4", (width,))])
            body = np.fromfile(f, dtype=record, count=int(h["row_count"]))
            if body.size != int(h["row_count"]):
                raise InvalidArgument(f"{path}: {body.size} of {int(h['row_count'])} rows present")
        keys_parts.append(body["key"])
        rows_parts.append(body["data"][:, :dim])
    if not keys_parts:
        return np.zeros(0, np.int64), np.zeros((0, 0), np.float32)
    keys = np.concatenate(keys_parts)
    rows = np.concatenate(rows_parts)
    # The last occurrence of a key wins: reverse, unique keeps the first.
    rev_keys = keys[::-1]
    unique, first = np.unique(rev_keys, return_index=True)
    return unique.astype(np.int64), np.ascontiguousarray(rows[::-1][first], dtype=np.float32)


def _localize_pulls(program: Program, plan: PsPlan) -> dict[int, str]:
    """Replaces each pull_sparse by lookup_sparse_rows over `<param>@KEYS` / `<param>@ROWS`;
    returns the tables used (id -> parameter name)."""
    block = program.global_block()
    by_id = {s.table_id: s for s in plan.sparse}
    used = {}
    for index, op in enumerate(list(block.ops)):
        if op.type != "pull_sparse":
            continue
        table = by_id[int(op.attrs["table_id"])]
        keys, rows = f"{table.param}@KEYS", f"{table.param}@ROWS"
        if not block.has_var(keys):
            block.vars[keys] = Variable(block, keys, (-1,), dtype="int64", persistable=True)
            block.vars[rows] = Variable(block, rows, (-1, table.dim), persistable=True)
        block.ops.remove(op)
        block._insert_op(
            index,
            "lookup_sparse_rows",
            inputs={"Ids": op.input("Ids"), "Keys": [keys], "W": [rows]},
            outputs={"Out": op.output("Out")},
            attrs={
                "padding_idx": int(op.attrs.get("padding_idx", -1)),
                OP_ROLE_ATTR: OP_ROLE_FORWARD,
            },
            infer_shape=False,
        )
        used[table.table_id] = table.param
    return used


def export(
    plan: PsPlan,
    client: PsClient,
    dirname: str,
    feeded: Sequence[str],
    targets: Sequence[str],
    program: Program,
) -> None:
    """Worker 0's part of save_inference_model (the caller flushed and met the others)."""
    dirname = os.fspath(dirname)
    os.makedirs(dirname, exist_ok=True)
    pruned = prune(program, feeded, targets)
    tables = _localize_pulls(pruned, plan)
    arrays: dict[str, np.ndarray] = {}
    if tables:
        tables_dir = os.path.join(dirname, TABLES_DIR)
        for table_id, param in tables.items():
            # Not a save of the job: the delta cycle of the next save_persistables goes on.
            client.save(tables_dir, table_id, end_save_cycle=False)
            keys, rows = read_sparse_values(part_paths(tables_dir, table_id))
            arrays[f"{param}@KEYS"], arrays[f"{param}@ROWS"] = keys, rows
        # The part files served their purpose: the export keeps values only.
        shutil.rmtree(tables_dir, ignore_errors=True)
    names = [
        v.name
        for v in pruned.global_block().vars.values()
        if model_files.saveable(v) and v.name not in arrays
    ]
    arrays.update(model_files.values_of(global_scope(), names, "save_inference_model"))
    model_files.write_inference_model(dirname, pruned, feeded, targets, arrays)


def load_inference_model(
    dirname: str,
    executor: Any,
    scope: Any = None,
    model_filename: Optional[str] = None,
    params_filename: Optional[str] = None,
) -> tuple[Program, list[str], list[Variable]]:
    """Reads an export (this module's, or fleet.io.save_inference_model's: the format of
    fleet/model_files.py): returns (program, fed names, target variables) and sets the saved
    parameters and table rows in `scope` (the global scope by default). Needs no server."""
    scope = scope if scope is not None else global_scope()
    return model_files.read_inference_model(dirname, scope, model_filename, params_filename)


__all__ = [
    "META_FILE",
    "MODEL_FILE",
    "PARAMS_FILE",
    "load_inference_model",
    "prune",
    "read_sparse_values",
]
