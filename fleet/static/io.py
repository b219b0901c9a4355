"""paddle.static's save and load of one process's model (a single-process or collective job):
persistables as one .npz, and inference models in the format `fleet.load_inference_model`
reads (fleet/ps/inference.py), so that one reader serves what any kind of job exported."""

from __future__ import annotations

import json
import os
from typing import Any, Sequence

import numpy as np

from fleet.errors import NotFound
from fleet.framework import Program, Variable, default_main_program
from fleet.ps.inference import META_FILE, MODEL_FILE, PARAMS_FILE, prune
from fleet.scope import global_scope

PERSISTABLES_SUFFIX = ".npz"


def _persistable_names(program: Program) -> list[str]:
    return [
        v.name
        for v in program.global_block().vars.values()
        if v.persistable and v.name not in ("feed", "fetch")
    ]


def _value(name: str, what: str) -> np.ndarray:
    found = global_scope().find_var(name)
    if found is None or not found.is_initialized():
        raise NotFound(f"{what}: '{name}' has no value in the scope; run the startup program first")
    return np.array(found.get_tensor().numpy(), copy=True)


def _write_atomic(path: str, write: Any) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    target = tmp + ".npz" if path.endswith(".npz") else tmp
    write(target)
    os.replace(target, path)


def save(program: Program, model_path: str) -> str:
    """paddle.static.save: every persistable of `program` into `model_path` + ".npz"; returns
    the file written."""
    path = model_path + PERSISTABLES_SUFFIX
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    arrays = {name: _value(name, "save") for name in _persistable_names(program)}
    _write_atomic(path, lambda p: np.savez(p, **arrays))
    return path


def load(program: Program, model_path: str, executor: Any = None) -> list[str]:
    """paddle.static.load: sets the saved values of `program`'s persistables in the global
    scope; returns the names set. A parameter the file lacks is an error naming it; other
    persistables (optimizer state, metric statistics) keep their values when it lacks them."""
    path = model_path if model_path.endswith(PERSISTABLES_SUFFIX) else model_path + ".npz"
    if not os.path.isfile(path):
        raise NotFound(f"load: no saved model at {path}")
    scope = global_scope()
    names = _persistable_names(program)
    with np.load(path) as saved:
        block = program.global_block()
        missing = [n for n in names if n not in saved.files and block.var(n).is_parameter]
        if missing:
            raise NotFound(f"load: {path} has no value of {', '.join(missing)}")
        loaded = [n for n in names if n in saved.files]
        for name in loaded:
            scope.var(name).get_tensor().set(saved[name])
    return loaded


def save_inference_model(
    path_prefix: str,
    feed_vars: Sequence[Variable],
    fetch_vars: Sequence[Variable],
    executor: Any = None,
    program: Program | None = None,
) -> None:
    """The forward program pruned to `fetch_vars` and its parameters, into the folder
    `path_prefix` (read back by fleet.load_inference_model / paddle.static.load_inference_model).
    """
    program = program or default_main_program()
    feeded = [getattr(v, "name", v) for v in feed_vars]
    targets = [getattr(v, "name", v) for v in fetch_vars]
    pruned = prune(program, feeded, targets)
    os.makedirs(path_prefix, exist_ok=True)
    arrays = {name: _value(name, "save_inference_model") for name in _persistable_names(pruned)}
    _write_atomic(os.path.join(path_prefix, PARAMS_FILE), lambda p: np.savez(p, **arrays))
    desc = pruned.desc().SerializeToString()
    _write_atomic(os.path.join(path_prefix, MODEL_FILE), lambda p: open(p, "wb").write(desc))
    meta = json.dumps({"feed": feeded, "fetch": targets})
    _write_atomic(
        os.path.join(path_prefix, META_FILE),
        lambda p: open(p, "w", encoding="utf-8").write(meta),
    )
