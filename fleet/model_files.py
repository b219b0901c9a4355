"""The on-disk formats of saved variables and inference models, shared by `fleet.io` (one
process, collective jobs) and the parameter-server export (`fleet/ps/inference.py`), so that
`fleet.load_inference_model` and `fleet.io.load_inference_model` read either.

An inference model directory holds:

* ``__model__`` (or the caller's model_filename): the forward program pruned to what computes the
  targets from the fed variables, a serialized ProgramDesc;
* ``__meta__.json``: the fed names and target names, in order;
* ``params.npz`` (or the caller's params_filename): the persistable variables the program reads.

Saved variables (`fleet.io.save_vars` and friends) are, as in Paddle, one file per variable named
by the variable (NumPy's .npy format inside), or all in one NumPy .npz file when a filename is
given. Every file is written to a temporary name and renamed: a reader sees the old file or the
new one, never half of one.
"""

from __future__ import annotations

import io
import json
import os
from typing import Any, Mapping, Sequence

import numpy as np

from fleet.errors import InvalidArgument, NotFound
from fleet.framework import OP_ROLE_ATTR, OP_ROLE_FORWARD, Program, Variable
from fleet.proto import framework_pb2

MODEL_FILE = "__model__"
META_FILE = "__meta__.json"
PARAMS_FILE = "params.npz"
_NOT_SAVED = ("feed", "fetch")


def check_directory(dirname: str, what: str) -> str:
    """`dirname` as a str, refused (naming it) when it exists and is not a directory."""
    dirname = os.fspath(dirname)
    if os.path.exists(dirname) and not os.path.isdir(dirname):
        raise InvalidArgument(f"{what}: {dirname!r} is a file, not a directory; nothing was saved")
    return dirname


def write_atomic(path: str, data: bytes) -> None:
    """Writes `data` to `path` through a temporary file, fsync'd, then renamed over it."""
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise InvalidArgument(f"cannot write {path}: {e}") from None


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def saveable(var: Variable) -> bool:
    """Whether `var` is a variable save_persistables writes (persistable, not a feed/fetch
    holder)."""
    return var.persistable and var.name not in _NOT_SAVED


def values_of(scope: Any, names: Sequence[str], what: str) -> dict[str, np.ndarray]:
    """Copies of the named variables' values in `scope`; NotFound names the first without one."""
    arrays = {}
    for name in names:
        found = scope.find_var(name)
        if found is None or not found.is_initialized():
            raise NotFound(
                f"{what}: '{name}' has no value in the scope; run the startup program first"
            )
        arrays[name] = np.array(found.get_tensor().numpy(), copy=True)
    return arrays


def set_values(scope: Any, arrays: Mapping[str, np.ndarray], source: str) -> None:
    """Sets each array as its variable's value in `scope`; a variable that already holds a value
    of another shape is refused, naming it and `source`."""
    for name, value in arrays.items():
        found = scope.find_var(name)
        if found is not None and found.is_initialized():
            current = found.get_tensor().numpy()
            if current.shape != value.shape:
                raise InvalidArgument(
                    f"{source}: '{name}' has shape {value.shape}, the scope's has {current.shape}"
                )
            value = value.astype(current.dtype, copy=False)
        scope.var(name).get_tensor().set(np.ascontiguousarray(value))


def save_arrays(dirname: str, arrays: Mapping[str, np.ndarray], filename: str | None) -> None:
    """One .npy file per array named by its variable, or all of them in `filename` (.npz)."""
    os.makedirs(dirname, exist_ok=True)
    if filename is not None:
        write_atomic(os.path.join(dirname, filename), npz_bytes(arrays))
        return
    for name, value in arrays.items():
        path = os.path.join(dirname, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        buffer = io.BytesIO()
        np.save(buffer, value)
        write_atomic(path, buffer.getvalue())


def load_arrays(dirname: str, names: Sequence[str], filename: str | None) -> dict[str, np.ndarray]:
    """The arrays `save_arrays` wrote for `names`; NotFound names a missing variable and file."""
    dirname = os.fspath(dirname)
    if filename is not None:
        path = os.path.join(dirname, filename)
        if not os.path.isfile(path):
            raise NotFound(f"no saved variables at {path}")
        with np.load(path) as saved:
            absent = [n for n in names if n not in saved.files]
            if absent:
                raise NotFound(f"{path} holds no value of {absent}")
            return {n: saved[n] for n in names}
    arrays = {}
    for name in names:
        path = os.path.join(dirname, name)
        if not os.path.isfile(path):
            raise NotFound(f"no saved value of '{name}': {path} does not exist")
        arrays[name] = np.load(path, allow_pickle=False)
    return arrays


def prune(program: Program, feeded: Sequence[str], targets: Sequence[str]) -> Program:
    """A forward-only copy of `program` keeping the ops that the targets depend on, stopping at
    the fed variables."""
    test = program.clone(for_test=True)
    block = test.global_block()
    needed, kept = set(targets), []
    for op in reversed(list(block.ops)):
        if op.attrs.get(OP_ROLE_ATTR, OP_ROLE_FORWARD) != OP_ROLE_FORWARD:
            continue
        if needed & set(op.output_names):
            kept.append(op)
            needed |= {n for n in op.input_names if n not in feeded}
    keep_ids = {id(op) for op in kept}
    for op in [op for op in block.ops if id(op) not in keep_ids]:
        block.ops.remove(op)
    used = {n for op in kept for n in op.input_names + op.output_names} | set(feeded)
    for name in [n for n in block.vars if n not in used]:
        block._remove_var(name)
    missing = [t for t in targets if t not in used]
    if missing:
        raise InvalidArgument(
            f"save_inference_model: targets {missing} are not computed by the program"
        )
    return test


def write_inference_model(
    dirname: str,
    program: Program,
    feeded: Sequence[str],
    targets: Sequence[str],
    arrays: Mapping[str, np.ndarray],
    model_filename: str | None = None,
    params_filename: str | None = None,
) -> None:
    """Writes a pruned program, its fed and target names and its variables' values."""
    os.makedirs(dirname, exist_ok=True)
    write_atomic(os.path.join(dirname, params_filename or PARAMS_FILE), npz_bytes(arrays))
    write_atomic(
        os.path.join(dirname, model_filename or MODEL_FILE),
        program.desc().SerializeToString(),
    )
    meta = {"feed": list(feeded), "fetch": list(targets)}
    write_atomic(os.path.join(dirname, META_FILE), json.dumps(meta).encode("utf-8"))


def export_scope_model(
    dirname: str,
    program: Program,
    feeded: Sequence[str],
    targets: Sequence[str],
    scope: Any,
    model_filename: str | None = None,
    params_filename: str | None = None,
    program_only: bool = False,
) -> None:
    """An inference model of `program` (pruned to `targets`) with the values `scope` holds."""
    pruned = prune(program, feeded, targets)
    names = [v.name for v in pruned.global_block().vars.values() if saveable(v)]
    arrays = {} if program_only else values_of(scope, names, "save_inference_model")
    write_inference_model(dirname, pruned, feeded, targets, arrays, model_filename, params_filename)


def read_inference_model(
    dirname: str,
    scope: Any,
    model_filename: str | None = None,
    params_filename: str | None = None,
) -> tuple[Program, list[str], list[Variable]]:
    """Reads what write_inference_model wrote: (program, fed names, target variables), with the
    saved values set in `scope`."""
    dirname = os.fspath(dirname)
    try:
        with open(os.path.join(dirname, model_filename or MODEL_FILE), "rb") as f:
            desc = framework_pb2.ProgramDesc.FromString(f.read())
        with open(os.path.join(dirname, META_FILE), encoding="utf-8") as f:
            meta = json.load(f)
        params = np.load(os.path.join(dirname, params_filename or PARAMS_FILE))
    except FileNotFoundError as e:
        raise NotFound(f"no inference model in {dirname}: {e.filename} is missing") from None
    program = Program.from_desc(desc)
    block = program.global_block()
    with params:
        for name in params.files:
            if not block.has_var(name):
                raise InvalidArgument(
                    f"{dirname}/{params_filename or PARAMS_FILE}: '{name}' is not a variable "
                    "of the saved program"
                )
            scope.var(name).get_tensor().set(params[name])
    for var in block.vars.values():
        if saveable(var) and scope.find_var(var.name) is None:
            raise NotFound(f"{dirname}: no saved value of '{var.name}'")
    return program, list(meta["feed"]), [block.var(n) for n in meta["fetch"]]


__all__ = [
    "META_FILE",
    "MODEL_FILE",
    "PARAMS_FILE",
    "check_directory",
    "export_scope_model",
    "load_arrays",
    "npz_bytes",
    "prune",
    "read_inference_model",
    "save_arrays",
    "saveable",
    "set_values",
    "values_of",
    "write_atomic",
    "write_inference_model",
]
